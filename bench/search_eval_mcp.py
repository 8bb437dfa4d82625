"""The third held-out search set (issue 38): real tools of public MCP servers, never tuned on.

The tools are bench/search_eval_mcp_tools.json (built by bench/build_mcp_tools.py from the repositories and commits
listed in its `sources`: github/github-mcp-server, microsoft/playwright-mcp, ChromeDevTools/chrome-devtools-mcp,
containers/kubernetes-mcp-server, grafana/mcp-grafana, and the filesystem, memory and fetch servers of
modelcontextprotocol/servers): 413 tools of 8 servers, with their names, descriptions and params as written upstream.
Each becomes the tool `<server>.<name>` of group `<server>`.

- The 40 intents below were written from that file alone (the tools' names, descriptions and params), before any
  search was run on this set, and were not changed after (except where the paraphrase check refused one, before any
  score was seen). No separate helper was available to the session that wrote them (see bench/README.md).
- Per intent: a keyword query, a task query, a paraphrase (sharing no content stem with its tool's key, description
  or params: search_eval.py checks), a param query (param names or `name=value`; none where upstream lists no
  params), and a typo query made by held-out's procedure (a seeded random edit of a content word of the keyword
  query: `search_eval_heldout.typo`).
- Also acceptable: another server's tool doing the same thing (`chrome-devtools.take_screenshot` for Playwright's).
Ranking changes are never decided on this set: it only reports.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TOOLS_FILE = Path(__file__).resolve().parent / "search_eval_mcp_tools.json"

# (server, name, {kind: query}, [also acceptable keys])
Intent = tuple[str, str, dict[str, str], list[str]]

INTENTS: list[Intent] = [
    (
        "github",
        "list_releases",
        {
            "keyword": "list releases",
            "task": "what versions of cli/cli have been published",
            "param": "owner repo perPage",
            "paraphrase": "shipped versions of a project",
        },
        [],
    ),
    (
        "github",
        "delete_file",
        {
            "keyword": "delete file github",
            "task": "remove docs/old.md from the main branch",
            "param": "path branch message",
            "paraphrase": "erase a document stored in a remote codebase",
        },
        [],
    ),
    (
        "github",
        "fork_repository",
        {
            "keyword": "fork repository",
            "task": "make my own copy of torvalds/linux",
            "param": "organization=myorg",
            "paraphrase": "duplicate someone's project into mine",
        },
        [],
    ),
    (
        "github",
        "get_dependabot_alert",
        {
            "keyword": "dependabot alert",
            "task": "show vulnerable dependency warning 42",
            "param": "alertNumber owner repo",
            "paraphrase": "a flagged insecure package version",
        },
        [],
    ),
    (
        "github",
        "list_starred_repositories",
        {
            "keyword": "starred repos",
            "task": "which projects have I bookmarked",
            "param": "username sort direction",
            "paraphrase": "projects I have favourited",
        },
        [],
    ),
    (
        "github",
        "mark_all_notifications_read",
        {
            "keyword": "mark notifications read",
            "task": "clear my inbox of github pings",
            "param": "lastReadAt",
            "paraphrase": "dismiss every unseen alert at once",
        },
        ["github.dismiss_notification"],
    ),
    (
        "github",
        "search_commits",
        {
            "keyword": "search commits",
            "task": "who changed the retry logic last month",
            "param": "query sort order",
            "paraphrase": "look up who wrote which past edits",
        },
        [],
    ),
    (
        "github",
        "update_issue_labels",
        {
            "keyword": "issue labels",
            "task": "tag ticket 17 as bug and urgent",
            "param": "issue_number labels",
            "paraphrase": "recategorize a ticket with new tags",
        },
        [],
    ),
    (
        "github",
        "update_pull_request_draft_state",
        {
            "keyword": "pull request draft",
            "task": "my PR is done, take it out of draft",
            "param": "pullNumber draft=false",
            "paraphrase": "flip an unfinished code proposal to finished",
        },
        [],
    ),
    (
        "github",
        "create_gist",
        {
            "keyword": "create gist",
            "task": "share this snippet as a public paste",
            "param": "filename content public",
            "paraphrase": "publish a small code snippet online",
        },
        [],
    ),
    (
        "github",
        "get_team_members",
        {
            "keyword": "team members",
            "task": "who is on the platform team at acme",
            "param": "org team_slug",
            "paraphrase": "people belonging to a group in our company",
        },
        [],
    ),
    (
        "playwright",
        "browser_resize",
        {
            "keyword": "resize browser",
            "task": "make the window 390 by 844 like a phone",
            "param": "width height",
            "paraphrase": "change viewport dimensions",
        },
        ["chrome-devtools.resize_page"],
    ),
    (
        "playwright",
        "browser_file_upload",
        {
            "keyword": "upload file",
            "task": "attach resume.pdf to the form",
            "param": "paths",
            "paraphrase": "send a document from disk through a page's picker",
        },
        ["chrome-devtools.upload_file"],
    ),
    (
        "playwright",
        "browser_cookie_delete",
        {
            "keyword": "delete cookie",
            "task": "get rid of the session_id cookie",
            "param": "name=session_id",
            "paraphrase": "forget one stored site token",
        },
        [],
    ),
    (
        "playwright",
        "browser_localstorage_clear",
        {
            "keyword": "clear localstorage",
            "task": "wipe everything the site saved in local storage",
            "param": "",
            "paraphrase": "empty the site's persistent key-value data",
        },
        [],
    ),
    (
        "playwright",
        "browser_take_screenshot",
        {
            "keyword": "screenshot",
            "task": "capture what the page looks like now",
            "param": "fullPage filename",
            "paraphrase": "grab a picture of what is shown",
        },
        ["chrome-devtools.take_screenshot"],
    ),
    (
        "playwright",
        "browser_mouse_wheel",
        {
            "keyword": "scroll mouse wheel",
            "task": "scroll down 500 pixels",
            "param": "deltaX deltaY",
            "paraphrase": "move further down the page",
        },
        [],
    ),
    (
        "playwright",
        "browser_select_option",
        {
            "keyword": "select dropdown option",
            "task": "choose Germany in the country list",
            "param": "values element",
            "paraphrase": "pick a choice from a combo box",
        },
        [],
    ),
    (
        "playwright",
        "browser_navigate_back",
        {
            "keyword": "navigate back",
            "task": "return to the page I was on before",
            "param": "",
            "paraphrase": "return to the earlier site I visited",
        },
        ["chrome-devtools.navigate_page"],
    ),
    (
        "chrome-devtools",
        "take_heapsnapshot",
        {
            "keyword": "heap snapshot",
            "task": "debug a memory leak in the app",
            "param": "filePath",
            "paraphrase": "dump what the script allocated in RAM",
        },
        [],
    ),
    (
        "chrome-devtools",
        "lighthouse_audit",
        {
            "keyword": "lighthouse audit",
            "task": "check accessibility and SEO score of the page",
            "param": "outputDirPath",
            "paraphrase": "grade the site against web quality guidelines",
        },
        [],
    ),
    (
        "chrome-devtools",
        "performance_start_trace",
        {
            "keyword": "performance trace",
            "task": "why is LCP so slow on the homepage",
            "param": "autoStop reload",
            "paraphrase": "profile how quickly the site appears",
        },
        [],
    ),
    (
        "chrome-devtools",
        "evaluate_script",
        {
            "keyword": "evaluate javascript",
            "task": "run document.title in the page",
            "param": "function args",
            "paraphrase": "run code in the tab's context",
        },
        [],
    ),
    (
        "chrome-devtools",
        "fill_form",
        {
            "keyword": "fill form",
            "task": "enter name, email and tick the terms box",
            "param": "elements",
            "paraphrase": "complete several entry boxes together",
        },
        ["playwright.browser_fill_form"],
    ),
    (
        "chrome-devtools",
        "list_extensions",
        {
            "keyword": "list extensions",
            "task": "what add-ons are installed in chrome",
            "param": "",
            "paraphrase": "add-ons present in my web client",
        },
        [],
    ),
    (
        "kubernetes",
        "nodes_top",
        {
            "keyword": "node cpu memory usage",
            "task": "which worker machine is overloaded",
            "param": "label_selector",
            "paraphrase": "how busy are the fleet's machines",
        },
        [],
    ),
    (
        "kubernetes",
        "pods_exec",
        {
            "keyword": "exec in pod",
            "task": "open a shell in the api pod and run ls",
            "param": "command container",
            "paraphrase": "start a program inside a live workload",
        },
        [],
    ),
    (
        "kubernetes",
        "pods_delete",
        {
            "keyword": "delete pod",
            "task": "kill the stuck worker-7 pod so it restarts",
            "param": "name=worker-7 namespace=jobs",
            "paraphrase": "remove a crashed workload instance",
        },
        [],
    ),
    (
        "kubernetes",
        "helm_uninstall",
        {
            "keyword": "helm uninstall",
            "task": "remove the redis chart we deployed",
            "param": "name namespace",
            "paraphrase": "tear down a packaged application deployment",
        },
        [],
    ),
    (
        "kubernetes",
        "namespaces_list",
        {
            "keyword": "list namespaces",
            "task": "what namespaces exist in this cluster",
            "param": "fieldSelector",
            "paraphrase": "enumerate the tenancy partitions",
        },
        [],
    ),
    (
        "kubernetes",
        "vm_clone",
        {
            "keyword": "clone virtual machine",
            "task": "copy the vm db-1 to db-2",
            "param": "targetName",
            "paraphrase": "duplicate a guest instance",
        },
        [],
    ),
    (
        "kubernetes",
        "tekton_taskrun_logs",
        {
            "keyword": "taskrun logs",
            "task": "why did the build step of my ci task fail",
            "param": "step tail",
            "paraphrase": "output of a pipeline job stage",
        },
        [],
    ),
    (
        "grafana",
        "query_prometheus",
        {
            "keyword": "query prometheus",
            "task": "what was the request rate over the last hour",
            "param": "",
            "paraphrase": "run promql on the metrics store",
        },
        [],
    ),
    (
        "grafana",
        "list_incidents",
        {
            "keyword": "list incidents",
            "task": "are there any ongoing outages",
            "param": "",
            "paraphrase": "open emergencies being handled",
        },
        [],
    ),
    (
        "grafana",
        "alerting_manage_silences",
        {
            "keyword": "alert silences",
            "task": "mute alerts during tonight's maintenance",
            "param": "",
            "paraphrase": "stop notifications temporarily",
        },
        [],
    ),
    (
        "grafana",
        "update_alert_group",
        {
            "keyword": "acknowledge alert group",
            "task": "ack the page I got from oncall",
            "param": "",
            "paraphrase": "confirm I am handling the paging event",
        },
        [],
    ),
    (
        "grafana",
        "describe_clickhouse_table",
        {
            "keyword": "clickhouse table schema",
            "task": "what columns does the events table have in clickhouse",
            "param": "",
            "paraphrase": "fields of an analytics database relation",
        },
        [],
    ),
    (
        "filesystem",
        "write_file",
        {
            "keyword": "write file",
            "task": "save this text to notes.txt",
            "param": "path content",
            "paraphrase": "put text on disk, replacing what was there",
        },
        [],
    ),
    (
        "filesystem",
        "list_directory_with_sizes",
        {
            "keyword": "list directory sizes",
            "task": "which files in this folder are the biggest",
            "param": "sortBy=size",
            "paraphrase": "show how large each item of a folder is",
        },
        [],
    ),
    (
        "memory",
        "add_observations",
        {
            "keyword": "add observations",
            "task": "remember that alice prefers email",
            "param": "entityName contents",
            "paraphrase": "record extra facts about a known person",
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
