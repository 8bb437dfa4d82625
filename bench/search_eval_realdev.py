"""The real-dev search set (issue 38): real tools of public MCP servers that neither the held-out sets nor toolrun's
tuning used, made to decide the search's tuning on (a dev set: choosing on it is allowed; on held-out sets it is not).

The tools are bench/search_eval_realdev_tools.json (built by bench/build_realdev_tools.py from the repositories and
commits listed in its `sources`): 374 tools of 19 servers, none of them a server of the `mcp` set: the Slack, GitLab,
Google Maps, Puppeteer, Brave Search, SQLite, PostgreSQL, Google Drive and AWS KB servers of
modelcontextprotocol/servers (just before they were archived), its git and time servers, getsentry/sentry-mcp,
makenotion/notion-mcp-server, mongodb-js/mongodb-mcp-server, supabase-community/supabase-mcp,
elastic/mcp-server-elasticsearch, redis/mcp-redis and sooperset/mcp-atlassian (Jira and Confluence). Each becomes the
tool `<server>.<name>` of group `<server>`, with its name, description and params as written upstream.

- The intents' tools were chosen by a rule, not by hand (`chosen()`; `search_eval.py --check` verifies it): 56
  intents, one per server plus the other 37 shared among the servers in proportion to their tool counts (largest
  remainder), each server's picks evenly spaced through its tools in the file's order (index floor((k + 0.5) * n / m)).
- The queries below were written from the tools file alone (names, descriptions, params), before any search was run
  on this set, and committed before any run ("written blind, before any run"). Per intent: a keyword query, a task
  query (what a user wants done, in their words), a paraphrase (sharing no content stem with its tool's key,
  description or params: search_eval.py checks), a param query (param names or `name=value`; none where upstream
  lists no params: the MongoDB, Supabase and Elasticsearch READMEs list none), and a typo query made by held-out's
  procedure (a seeded random edit of a content word of the keyword query: `search_eval_heldout.typo`).
  The paraphrase check refused three paraphrases, which were rewritten before any score was seen (the only
  changes after the blind commit): Sentry's uptime monitor ("recent pings ..." -> "latest pings ..."), Jira's
  update_issue ("modify a ticket's details", whose "s" counted -> "modify the details of a ticket"), Confluence's
  page history ("... of a wiki article" -> "... of a team doc", refused again, -> "... of an intranet article").
- Also acceptable: another server's tool doing the same job on the same kind of thing (Supabase's `execute_sql` for
  SQLite's `write_query`, Google Maps' place search for Brave's local search); a tool of another vendor's product
  that only shares a verb (Supabase's `create_project` for Sentry's) is not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TOOLS_FILE = Path(__file__).resolve().parent / "search_eval_realdev_tools.json"
INTENT_COUNT = 56

# (server, name, {kind: query}, [also acceptable keys])
Intent = tuple[str, str, dict[str, str], list[str]]

INTENTS: list[Intent] = [
    (
        "slack",
        "slack_reply_to_thread",
        {
            "keyword": "slack reply in thread",
            "task": "answer Dana's question under her post in #deploys",
            "param": "channel_id thread_ts text",
            "paraphrase": "respond beneath someone's chat post so the conversation stays nested",
        },
        [],
    ),
    (
        "slack",
        "slack_get_users",
        {
            "keyword": "list slack users",
            "task": "who is in our Slack workspace?",
            "param": "cursor limit=200",
            "paraphrase": "everyone who belongs to the team chat, with names and avatars",
        },
        [],
    ),
    (
        "gitlab",
        "search_repositories",
        {
            "keyword": "gitlab search projects",
            "task": "find the terraform-modules repo on our GitLab",
            "param": "search=terraform per_page=50",
            "paraphrase": "look up codebases hosted on the self-managed forge by name",
        },
        [],
    ),
    (
        "gitlab",
        "create_merge_request",
        {
            "keyword": "create merge request",
            "task": "open an MR from feature/login into main",
            "param": "source_branch=feature/login target_branch=main draft=true",
            "paraphrase": "propose that my topic line of work be folded into the mainline for review",
        },
        [],
    ),
    (
        "google-maps",
        "maps_reverse_geocode",
        {
            "keyword": "reverse geocode",
            "task": "what street is at 48.8584, 2.2945",
            "param": "latitude longitude",
            "paraphrase": "turn a GPS fix into a street location a person can read",
        },
        [],
    ),
    (
        "google-maps",
        "maps_elevation",
        {
            "keyword": "elevation for locations",
            "task": "how high above sea level is Denver",
            "param": "locations",
            "paraphrase": "altitude of a spot on earth in metres",
        },
        [],
    ),
    (
        "puppeteer",
        "puppeteer_screenshot",
        {
            "keyword": "puppeteer screenshot",
            "task": "grab an image of the checkout page as it looks now in the headless browser",
            "param": "selector=#cart width=1280 height=800",
            "paraphrase": "snap a picture of what the headless browser is showing",
        },
        [],
    ),
    (
        "puppeteer",
        "puppeteer_select",
        {
            "keyword": "select dropdown option",
            "task": "choose Germany in the country dropdown of the signup form",
            "param": "selector=#country value=DE",
            "paraphrase": "pick an entry from a drop-down menu on a web form",
        },
        [],
    ),
    (
        "brave-search",
        "brave_local_search",
        {
            "keyword": "local business search",
            "task": "pizza places open near me in Austin",
            "param": "query='coffee shops' count=5",
            "paraphrase": "nearby shops and restaurants around a neighbourhood",
        },
        ["google-maps.maps_search_places"],
    ),
    (
        "sqlite",
        "write_query",
        {
            "keyword": "sqlite write query",
            "task": "run DELETE FROM sessions WHERE expired = 1",
            "param": 'query="UPDATE users SET active=0"',
            "paraphrase": "change rows in the local db file",
        },
        ["supabase.execute_sql"],
    ),
    (
        "sqlite",
        "list_tables",
        {
            "keyword": "list tables",
            "task": "what tables does my sqlite db have",
            "param": "",
            "paraphrase": "show the schema's relations in the embedded db",
        },
        ["supabase.list_tables"],
    ),
    (
        "postgres",
        "query",
        {
            "keyword": "postgres read-only sql query",
            "task": "SELECT count(*) FROM orders on the postgres box",
            "param": "sql",
            "paraphrase": "ask the relational store a question without modifying anything",
        },
        ["sqlite.read_query", "supabase.execute_sql"],
    ),
    (
        "gdrive",
        "search",
        {
            "keyword": "google drive search files",
            "task": "find the Q3 budget spreadsheet in my Drive",
            "param": "query=budget",
            "paraphrase": "locate a doc in my cloud storage",
        },
        [],
    ),
    (
        "aws-kb",
        "retrieve_from_aws_kb",
        {
            "keyword": "aws knowledge base retrieval",
            "task": "pull the passages about refund policy from our Bedrock KB",
            "param": "knowledgeBaseId n=5",
            "paraphrase": "fetch relevant chunks from the Bedrock RAG index",
        },
        [],
    ),
    (
        "git",
        "git_diff",
        {
            "keyword": "git diff branches",
            "task": "what changed between main and release-2.3",
            "param": "target=main context_lines=5",
            "paraphrase": "what was altered from one revision to another in the codebase",
        },
        [],
    ),
    (
        "git",
        "git_checkout",
        {
            "keyword": "git checkout branch",
            "task": "go to the hotfix branch in ~/src/app",
            "param": "branch_name=hotfix repo_path=~/src/app",
            "paraphrase": "move my working copy onto another line of development",
        },
        [],
    ),
    (
        "time",
        "convert_time",
        {
            "keyword": "convert time zone",
            "task": "what is 9:30 London time in Tokyo",
            "param": "source_timezone=Europe/London target_timezone=Asia/Tokyo time=09:30",
            "paraphrase": "what o'clock is it over there if it's 3pm here",
        },
        [],
    ),
    (
        "sentry",
        "create_project",
        {
            "keyword": "sentry create project",
            "task": "set up error tracking for our new checkout-service under team payments",
            "param": "organizationSlug teamSlug name platform=python",
            "paraphrase": "register a fresh codebase so its crashes get caught",
        },
        [],
    ),
    (
        "sentry",
        "find_organizations",
        {
            "keyword": "find sentry organizations",
            "task": "which Sentry orgs do I have access to",
            "param": "query",
            "paraphrase": "companies my login belongs to in the crash reporter",
        },
        [],
    ),
    (
        "sentry",
        "get_event_attachment",
        {
            "keyword": "download event attachment",
            "task": "get the minidump uploaded with error event c49541c7",
            "param": "eventId attachmentId projectSlug",
            "paraphrase": "the blobs shipped alongside one captured crash",
        },
        [],
    ),
    (
        "sentry",
        "get_profile",
        {
            "keyword": "cpu profile",
            "task": "why is POST /graphql slow this week",
            "param": "transactionName period=24h maxHotPaths=5",
            "paraphrase": "which functions eat the most processor cycles",
        },
        [],
    ),
    (
        "sentry",
        "get_uptime_monitor_details",
        {
            "keyword": "uptime monitor details",
            "task": "why is the health check for api.example.com failing",
            "param": "uptimeMonitorId checkLimit=20",
            "paraphrase": "latest pings of the availability probe for my site",
        },
        [],
    ),
    (
        "sentry",
        "update_dsn",
        {
            "keyword": "update dsn rate limit",
            "task": "cap client key abc123 at 1000 events per hour",
            "param": "keyId rateLimitCount=1000 rateLimitWindow=3600",
            "paraphrase": "throttle the ingestion token for a frontend",
        },
        [],
    ),
    (
        "notion",
        "API-get-block-children",
        {
            "keyword": "get block children",
            "task": "read what's nested inside this toggle on my Notion page",
            "param": "block_id page_size=100",
            "paraphrase": "what sits underneath a piece of a wiki doc",
        },
        [],
    ),
    (
        "notion",
        "API-retrieve-a-page-property",
        {
            "keyword": "retrieve page property",
            "task": "get the Status value of my Notion task page",
            "param": "page_id property_id",
            "paraphrase": "read one attribute of a wiki entry, like its tags",
        },
        [],
    ),
    (
        "notion",
        "API-retrieve-a-database",
        {
            "keyword": "notion get database",
            "task": "show metadata for the Roadmap database in Notion",
            "param": "database_id",
            "paraphrase": "details of a wiki table and the collections inside it",
        },
        [],
    ),
    (
        "mongodb",
        "collection-storage-size",
        {
            "keyword": "collection storage size",
            "task": "how much disk does the orders collection use in mongo",
            "param": "",
            "paraphrase": "how many bytes a document store table takes up",
        },
        [],
    ),
    (
        "mongodb",
        "drop-database",
        {
            "keyword": "drop database mongodb",
            "task": "get rid of the test_db database entirely",
            "param": "",
            "paraphrase": "wipe out a whole schema and everything in it",
        },
        [],
    ),
    (
        "mongodb",
        "mongodb-logs",
        {
            "keyword": "mongodb logs",
            "task": "show the latest mongod log entries",
            "param": "",
            "paraphrase": "what has the document server been writing to its journal lately",
        },
        [],
    ),
    (
        "mongodb",
        "atlas-create-project",
        {
            "keyword": "atlas create project",
            "task": "make a new Atlas project called analytics",
            "param": "",
            "paraphrase": "start a fresh workspace in the hosted mongo cloud",
        },
        [],
    ),
    (
        "mongodb",
        "atlas-list-projects",
        {
            "keyword": "list atlas projects",
            "task": "which Atlas projects does my org have",
            "param": "",
            "paraphrase": "every workspace in my hosted document-store account",
        },
        [],
    ),
    (
        "mongodb",
        "atlas-local-create-deployment",
        {
            "keyword": "atlas local deployment",
            "task": "spin up a local Atlas instance in docker for testing",
            "param": "",
            "paraphrase": "run a throwaway hosted-style mongo on my laptop",
        },
        [],
    ),
    (
        "supabase",
        "restore_project",
        {
            "keyword": "restore supabase project",
            "task": "unpause my staging project",
            "param": "",
            "paraphrase": "wake up a sleeping backend",
        },
        [],
    ),
    (
        "supabase",
        "list_migrations",
        {
            "keyword": "list migrations",
            "task": "which schema changes have been applied to prod on supabase",
            "param": "",
            "paraphrase": "history of schema changes that were applied",
        },
        [],
    ),
    (
        "supabase",
        "list_edge_functions",
        {
            "keyword": "list edge functions",
            "task": "what serverless functions are deployed in my supabase project",
            "param": "",
            "paraphrase": "which serverless handlers are deployed",
        },
        [],
    ),
    (
        "supabase",
        "rebase_branch",
        {
            "keyword": "rebase branch",
            "task": "my dev branch is behind prod migrations, catch it up",
            "param": "",
            "paraphrase": "bring my preview environment up to date with live",
        },
        [],
    ),
    (
        "elasticsearch",
        "get_mappings",
        {
            "keyword": "elasticsearch index mappings",
            "task": "what fields and types does the logs-2024 index have",
            "param": "",
            "paraphrase": "column types of a search cluster's collection",
        },
        [],
    ),
    (
        "elasticsearch",
        "esql",
        {
            "keyword": "esql query",
            "task": "FROM logs | STATS count() BY host",
            "param": "",
            "paraphrase": "run a piped statement language against the search cluster",
        },
        [],
    ),
    (
        "redis",
        "hexists",
        {
            "keyword": "redis hash field exists",
            "task": "does user:42 have an email field set",
            "param": "name=user:42 key=email",
            "paraphrase": "is an attribute present on a dictionary entry in the cache",
        },
        [],
    ),
    (
        "redis",
        "rpop",
        {
            "keyword": "rpop",
            "task": "take the newest job off the end of the jobs queue",
            "param": "name=jobs",
            "paraphrase": "pull the tail item off an ordered sequence in the cache",
        },
        [],
    ),
    (
        "redis",
        "scan_all_keys",
        {
            "keyword": "scan all keys pattern",
            "task": "find every key starting with session: in redis",
            "param": "pattern=session:* batch_size=500",
            "paraphrase": "enumerate every cache entry with a name like user*",
        },
        [],
    ),
    (
        "redis",
        "get_index_info",
        {
            "keyword": "redis index info",
            "task": "show the FT.INFO output for idx:products",
            "param": "index_name=idx:products",
            "paraphrase": "describe the layout of a full-text search structure in the cache",
        },
        [],
    ),
    (
        "redis",
        "srem",
        {
            "keyword": "redis set remove member",
            "task": "take alice out of the online_users set",
            "param": "name=online_users value=alice",
            "paraphrase": "drop one member from an unordered collection in the cache",
        },
        [],
    ),
    (
        "redis",
        "xgroup_destroy",
        {
            "keyword": "delete consumer group",
            "task": "remove the workers group from the events stream",
            "param": "key=events group_name=workers",
            "paraphrase": "tear down a set of readers on an append-only log",
        },
        [],
    ),
    (
        "jira",
        "jira_remove_watcher",
        {
            "keyword": "jira remove watcher",
            "task": "stop notifying Bob about PROJ-123",
            "param": "issue_key account_id",
            "paraphrase": "unsubscribe someone from updates on a ticket",
        },
        [],
    ),
    (
        "jira",
        "jira_get_issue_images",
        {
            "keyword": "jira issue images",
            "task": "show me the screenshots attached to BUG-88",
            "param": "issue_key=BUG-88",
            "paraphrase": "pictures people uploaded on a ticket",
        },
        [],
    ),
    (
        "jira",
        "jira_update_issue",
        {
            "keyword": "update jira issue",
            "task": "change the priority of PROJ-123 to High and add a comment",
            "param": "issue_key fields additional_fields",
            "paraphrase": "modify the details of a ticket",
        },
        [],
    ),
    (
        "jira",
        "jira_create_remote_issue_link",
        {
            "keyword": "remote issue link",
            "task": "attach the design doc URL to PROJ-12 as a web link",
            "param": "issue_key url title relationship",
            "paraphrase": "point a ticket at an outside address",
        },
        [],
    ),
    (
        "jira",
        "jira_get_project_versions",
        {
            "keyword": "jira project versions",
            "task": "what releases are planned in the MOBILE project",
            "param": "project_key=MOBILE",
            "paraphrase": "planned releases of a tracker board",
        },
        [],
    ),
    (
        "jira",
        "jira_get_request_type_fields",
        {
            "keyword": "request type fields",
            "task": "which inputs does the VPN access service desk form need",
            "param": "service_desk_id=4 request_type_id=23",
            "paraphrase": "what a helpdesk form asks the customer to fill in",
        },
        [],
    ),
    (
        "jira",
        "jira_get_issue_sla",
        {
            "keyword": "issue sla metrics",
            "task": "how long did SUP-101 sit in each status",
            "param": "issue_key metrics=cycle_time,lead_time working_hours_only=true",
            "paraphrase": "turnaround durations for a support ticket",
        },
        [],
    ),
    (
        "confluence",
        "confluence_get_space_page_tree",
        {
            "keyword": "confluence space page tree",
            "task": "show how the ENG space is organized",
            "param": "space_key=ENG limit",
            "paraphrase": "outline of everything in a wiki area, nested",
        },
        [],
    ),
    (
        "confluence",
        "confluence_delete_page",
        {
            "keyword": "delete confluence page",
            "task": "remove the outdated onboarding doc (id 12345)",
            "param": "page_id=12345",
            "paraphrase": "get rid of a wiki article",
        },
        [],
    ),
    (
        "confluence",
        "confluence_get_page_history",
        {
            "keyword": "confluence page history version",
            "task": "what did the runbook look like in version 7",
            "param": "page_id version=7 convert_to_markdown",
            "paraphrase": "an older revision of an intranet article",
        },
        [],
    ),
    (
        "confluence",
        "confluence_download_content_attachments",
        {
            "keyword": "download all attachments confluence",
            "task": "grab every file attached to the release notes page",
            "param": "content_id",
            "paraphrase": "fetch each upload that hangs off a wiki article",
        },
        [],
    ),
    (
        "confluence",
        "confluence_set_page_restrictions",
        {
            "keyword": "set page restrictions",
            "task": "only let the security group edit the incident runbook",
            "param": "page_id edit_groups=security read_users",
            "paraphrase": "lock down who can see or change a wiki article",
        },
        [],
    ),
]


def tools() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(TOOLS_FILE.read_text(encoding="utf-8"))["tools"]
    return data


def sources() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(TOOLS_FILE.read_text(encoding="utf-8"))["sources"]
    return data


def chosen() -> list[tuple[str, str]]:
    """The (server, name) of each intent by the rule of the docstring: one per server, the rest in proportion to the
    servers' tool counts (largest remainder, ties in file order), evenly spaced through each server's tools."""
    by_server: dict[str, list[str]] = {}
    for tool in tools():
        by_server.setdefault(tool["server"], []).append(tool["name"])
    total = sum(len(names) for names in by_server.values())
    rest = INTENT_COUNT - len(by_server)
    quota = {s: rest * len(names) / total for s, names in by_server.items()}
    count = {s: 1 + int(q) for s, q in quota.items()}
    for server in sorted(quota, key=lambda s: -(quota[s] - int(quota[s])))[: INTENT_COUNT - sum(count.values())]:
        count[server] += 1
    return [
        (server, names[int((k + 0.5) * len(names) / count[server])])
        for server, names in by_server.items()
        for k in range(count[server])
    ]
