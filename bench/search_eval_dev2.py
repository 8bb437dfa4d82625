"""The search evaluation's second dev part (`dev-2`, issue 26): other domains, harder queries, to decide on with dev.

Dev (search_eval_data.py) is saturated: the search constants were tuned on it until fused R@3 reached 0.92 there
while held-out stayed at 0.84, so dev no longer tells a good change from a bad one. This part is made apart from
both: its 23 groups are in neither dev's catalog nor held-out's (identity directories, message queues, network file
storage, virtual machines, load balancers, Cassandra, Elasticsearch, Terraform, Ansible, feature flags, secrets,
compliance, on-call, cloud cost, build caches, package registries, mobile releases, web analytics, forms, booking,
device fleets, energy meters, legal contracts).

Each intent is one tool (group, name, description, params) and five queries:

- keyword: the words a user types into a search box;
- task: the job, as an agent or a person states it, often carrying values (ids, names, dates, numbers);
- param: the tool's param names (or `name=value`), as an agent asks when it holds values;
- paraphrase: the same need in other words; it shares no content word (after stemming) with its tool's group,
  name, description or params: search_eval.py checks (`dev2_overlaps`) and refuses to run when one does;
- typo: the keyword query with one seeded random edit (a swap, a drop, a doubling, a neighbouring key or an
  inserted letter) in one of its words of four letters or more.

Around the 48 intents, distractors of the same groups (`distractors`): every verb on every object a group handles,
named verb-first or noun-first, described by one of several phrasings, with params drawn from the group's own
(varied: not one fixed pair for all), about 1,100 tools. `also` lists other keys that are equally right answers.

The intents and their queries were written from the tool, before any ranking was run on them, and were not changed
after seeing a score (the paraphrase check, which looks at no ranking, was run while writing them).
"""

from __future__ import annotations

import random

# (group, name, description, [(param, type, description)], {kind: query}, [also acceptable keys])
Intent = tuple[str, str, str, list[tuple[str, str, str]], dict[str, str], list[str]]

INTENTS: list[Intent] = [
    ("ldap", "user_lookup", "Look up a directory account by uid and print its attributes and group memberships.",
     [("uid", "str", "Account uid."), ("attrs", "list", "Only these attributes.")],
     {"keyword": "ldap user lookup", "task": "show the ldap entry and groups of jdoe",
      "param": "uid attrs", "paraphrase": "who is this employee in the corporate address book"}, []),
    ("ldap", "reset_password", "Reset the password of a directory account and force a change at next login.",
     [("uid", "str", "Account uid."), ("notify", "bool", "Mail the new temporary password to the owner.")],
     {"keyword": "reset ldap password", "task": "bob is locked out and forgot his password, give him a temporary one",
      "param": "uid notify", "paraphrase": "issue fresh credentials to a colleague who cannot sign in"}, []),
    ("sqs", "queue_depth", "Show how many messages wait in an SQS queue and the age of the oldest.",
     [("queue", "str", "Queue name or URL."), ("region", "str", "AWS region.")],
     {"keyword": "sqs queue depth", "task": "how many messages are waiting in orders-incoming",
      "param": "queue region", "paraphrase": "backlog size of pending jobs"}, []),
    ("sqs", "purge", "Delete every message in an SQS queue.",
     [("queue", "str", "Queue name or URL."), ("region", "str", "AWS region.")],
     {"keyword": "purge sqs queue", "task": "empty the test-events queue before rerunning the load test",
      "param": "queue=test-events region=eu-west-1", "paraphrase": "throw away all waiting work items"}, []),
    ("sqs", "dead_letters", "List the messages moved to a queue's dead-letter queue, with their receive counts.",
     [("queue", "str", "Source queue."), ("limit", "int", "How many messages.")],
     {"keyword": "dead letter queue messages", "task": "show the failed messages of invoice-events",
      "param": "queue limit", "paraphrase": "items that kept failing and got parked"}, []),
    ("nfs", "exports", "List the NFS exports of a file server and which clients may mount them.",
     [("server", "str", "File server host."), ("path", "str", "Only this export path.")],
     {"keyword": "nfs exports", "task": "which hosts are allowed to mount /srv/share from filer2",
      "param": "server path", "paraphrase": "shared network folders and who can attach them"}, []),
    ("nfs", "stale_mounts", "Find NFS mounts on this host that no longer respond (stale file handles).",
     [("timeout", "int", "Seconds to wait for each mount.")],
     {"keyword": "stale nfs mounts", "task": "ls hangs on /mnt/data, check for dead nfs mounts",
      "param": "timeout=5", "paraphrase": "remote shares that hang"}, []),
    ("vm", "snapshot", "Take a snapshot of a virtual machine, optionally with its memory state.",
     [("vm", "str", "VM name."), ("name", "str", "Snapshot name."), ("memory", "bool", "Include the memory state.")],
     {"keyword": "vm snapshot", "task": "snapshot build-runner-3 before the kernel upgrade",
      "param": "vm name memory", "paraphrase": "save a restore point of a guest before patching"}, []),
    ("vm", "migrate", "Live-migrate a virtual machine to another hypervisor host.",
     [("vm", "str", "VM name."), ("host", "str", "Target hypervisor.")],
     {"keyword": "migrate vm", "task": "move db-vm-2 to hv07 so we can service hv03",
      "param": "vm=db-vm-2 host=hv07", "paraphrase": "shift a running guest onto different hardware"}, []),
    ("vm", "console", "Open the serial console of a virtual machine.",
     [("vm", "str", "VM name.")],
     {"keyword": "vm console", "task": "the guest won't boot, attach to the console of web-vm-9",
      "param": "vm", "paraphrase": "see the boot screen of a guest"}, []),
    ("lb", "drain", "Drain a backend from a load balancer pool so no new connections reach it.",
     [("pool", "str", "Pool name."), ("backend", "str", "Backend address."),
      ("wait", "int", "Seconds to wait for open connections to finish.")],
     {"keyword": "drain backend load balancer", "task": "take 10.0.4.12 out of the web pool before patching it",
      "param": "pool backend wait", "paraphrase": "stop sending traffic to one server"}, []),
    ("lb", "health", "Show the health check status of every backend in a load balancer pool.",
     [("pool", "str", "Pool name.")],
     {"keyword": "load balancer health", "task": "which backends in the api pool are failing their checks",
      "param": "pool", "paraphrase": "are the upstream servers marked up or down"}, []),
    ("cassandra", "repair", "Run an anti-entropy repair of a Cassandra keyspace.",
     [("keyspace", "str", "Keyspace."), ("table", "str", "Only this table."),
      ("full", "bool", "Full repair instead of incremental.")],
     {"keyword": "cassandra repair", "task": "run a repair of the events keyspace on the ring",
      "param": "keyspace table full", "paraphrase": "make replicas agree again"}, []),
    ("cassandra", "ring_status", "Show the status, load and token ownership of every node in a Cassandra cluster.",
     [("host", "str", "Any node of the cluster.")],
     {"keyword": "cassandra node status", "task": "is any cassandra node down in the eu cluster",
      "param": "host", "paraphrase": "which members of the wide-column database are unhealthy"}, []),
    ("elastic", "cluster_health",
     "Show the health of an Elasticsearch cluster: status, unassigned shards, pending tasks.",
     [("cluster", "str", "Cluster name.")],
     {"keyword": "elasticsearch cluster health", "task": "why is the logging cluster yellow",
      "param": "cluster", "paraphrase": "is the full-text engine green"}, []),
    ("elastic", "reindex", "Copy the documents of one Elasticsearch index into another.",
     [("source", "str", "Source index."), ("dest", "str", "Destination index."), ("slices", "int", "Parallel slices.")],
     {"keyword": "elasticsearch reindex", "task": "reindex products-v3 into products-v4 with the new mapping",
      "param": "source dest slices", "paraphrase": "migrate stored records to a new schema"}, []),
    ("elastic", "delete_indices", "Delete Elasticsearch indices older than a number of days.",
     [("pattern", "str", "Index pattern, e.g. logs-*."), ("days", "int", "Age in days.")],
     {"keyword": "delete old elasticsearch indices", "task": "remove logstash indices older than 30 days",
      "param": "pattern=logs-* days=30", "paraphrase": "free up cluster room by dropping stale time-series data"}, []),
    ("terraform", "plan", "Show what terraform would change in a workspace, without applying it.",
     [("workspace", "str", "Workspace name."), ("dir", "str", "Configuration directory."),
      ("target", "str", "Only this resource address.")],
     {"keyword": "terraform plan", "task": "preview the infra changes for the staging workspace",
      "param": "workspace dir target", "paraphrase": "dry run of the infrastructure code"}, []),
    ("terraform", "force_unlock", "Release a stuck terraform state lock by its lock id.",
     [("lock_id", "str", "Lock ID."), ("workspace", "str", "Workspace name.")],
     {"keyword": "terraform force unlock state",
      "task": "the state has been locked since the CI job died, lock id 6a1f-22",
      "param": "lock_id workspace", "paraphrase": "clear a leftover mutex on shared infra"}, []),
    ("terraform", "drift", "Compare the real cloud resources with terraform state and list what drifted.",
     [("workspace", "str", "Workspace name.")],
     {"keyword": "terraform drift", "task": "did anyone change the prod resources by hand in the console",
      "param": "workspace=prod", "paraphrase": "manual edits outside of code"}, []),
    ("ansible", "playbook", "Run an Ansible playbook against an inventory, optionally limited to some hosts.",
     [("playbook", "str", "Playbook file."), ("inventory", "str", "Inventory file."),
      ("limit", "str", "Host pattern."), ("check", "bool", "Dry run.")],
     {"keyword": "run ansible playbook", "task": "apply site.yml to the web servers only",
      "param": "playbook inventory limit", "paraphrase": "push configuration to a fleet of machines"}, []),
    ("ansible", "facts", "Gather the Ansible facts of a host: OS, interfaces, memory, disks.",
     [("host", "str", "Host name.")],
     {"keyword": "ansible facts", "task": "what os version and how much memory does app7 have",
      "param": "host", "paraphrase": "inventory of a box's hardware and software"}, []),
    ("flags", "toggle", "Turn a feature flag on or off for an environment.",
     [("flag", "str", "Flag key."), ("env", "str", "Environment."), ("enabled", "bool", "On or off.")],
     {"keyword": "toggle feature flag", "task": "turn off new-checkout in production right now",
      "param": "flag env enabled", "paraphrase": "disable a capability for customers"}, []),
    ("flags", "rollout", "Roll out a feature flag to a percentage of users.",
     [("flag", "str", "Flag key."), ("percent", "int", "Share of users, 0-100.")],
     {"keyword": "feature flag percentage rollout", "task": "enable dark-mode for 10% of users",
      "param": "flag=dark-mode percent=10", "paraphrase": "gradual release to a slice of the audience"}, []),
    ("secrets", "rotate", "Rotate a secret: generate a new value, store it and restart its consumers.",
     [("name", "str", "Secret name."), ("restart", "bool", "Restart the services that use it.")],
     {"keyword": "rotate secret", "task": "the stripe api key leaked, replace it everywhere",
      "param": "name restart", "paraphrase": "swap a leaked credential for a fresh one"}, []),
    ("secrets", "expiring", "List secrets and API keys that expire within a number of days.",
     [("days", "int", "Window in days.")],
     {"keyword": "expiring secrets", "task": "which api keys run out in the next 14 days",
      "param": "days=14", "paraphrase": "credentials about to lapse"}, []),
    ("compliance", "audit_report", "Generate a compliance evidence report (SOC 2 controls) for a period.",
     [("framework", "str", "Framework, e.g. soc2 or iso27001."), ("start", "str", "Period start date."),
      ("end", "str", "Period end date.")],
     {"keyword": "compliance audit report", "task": "produce the soc2 evidence pack for Q3 for the auditors",
      "param": "framework start end", "paraphrase": "paperwork proving we follow the security standard"}, []),
    ("compliance", "access_review", "List who has admin access to each system, for the quarterly access review.",
     [("system", "str", "Only this system.")],
     {"keyword": "access review admins", "task": "who has admin rights on the prod database",
      "param": "system", "paraphrase": "which people hold elevated privileges"}, []),
    ("oncall", "current", "Show who is on call now for a team's rotation.",
     [("team", "str", "Team name.")],
     {"keyword": "who is on call", "task": "who do I page for the storage team tonight",
      "param": "team", "paraphrase": "the engineer holding the pager at this moment"}, []),
    ("oncall", "override", "Put someone on call in place of the scheduled person for a time window.",
     [("team", "str", "Team name."), ("user", "str", "Who takes over."), ("start", "str", "Start time."),
      ("end", "str", "End time.")],
     {"keyword": "on call override", "task": "cover for maria's shift on saturday from 9 to 17",
      "param": "team user start end", "paraphrase": "swap a shift with a colleague"}, []),
    ("oncall", "page", "Page the on-call engineer of a team with a message.",
     [("team", "str", "Team name."), ("message", "str", "What to say."), ("urgency", "str", "high or low.")],
     {"keyword": "page on call", "task": "wake up the database on-call, replication is broken",
      "param": "team message urgency", "paraphrase": "alert the responder by phone"}, []),
    ("finops", "cost_by_service", "Show cloud spend per service for a month.",
     [("month", "str", "Month, YYYY-MM."), ("account", "str", "Cloud account.")],
     {"keyword": "cloud cost by service", "task": "what did we spend on each aws service in 2026-10",
      "param": "month account", "paraphrase": "where is the money going on our hosting bill"}, []),
    ("finops", "idle_resources",
     "Find cloud resources that cost money but are idle: unattached volumes, stopped instances, unused IPs.",
     [("account", "str", "Cloud account."), ("min_cost", "float", "Smallest monthly cost reported.")],
     {"keyword": "idle cloud resources", "task": "find unattached disks and unused elastic ips we still pay for",
      "param": "account min_cost", "paraphrase": "waste we could delete to save"}, []),
    ("buildcache", "stats", "Show the hit rate and size of the remote build cache.",
     [("project", "str", "Project.")],
     {"keyword": "build cache hit rate", "task": "why are builds of monorepo slow, is the cache working",
      "param": "project", "paraphrase": "how often compiles reuse earlier outputs"}, []),
    ("buildcache", "evict", "Evict build cache entries older than a number of days or above a size.",
     [("days", "int", "Age in days."), ("max_size", "str", "Largest total size to keep, e.g. 500G.")],
     {"keyword": "evict build cache", "task": "the cache disk is at 95%, trim entries older than 7 days",
      "param": "days max_size", "paraphrase": "prune stale artifacts from compilation storage"}, []),
    ("registry", "publish", "Publish a package version to the internal package registry.",
     [("package", "str", "Package name."), ("version", "str", "Version."), ("path", "str", "Built archive.")],
     {"keyword": "publish package registry", "task": "upload libauth 2.3.1 to our internal registry",
      "param": "package version path", "paraphrase": "release a library for other teams to install"}, []),
    ("registry", "yank", "Yank a published package version so new installs skip it.",
     [("package", "str", "Package name."), ("version", "str", "Version."), ("reason", "str", "Why.")],
     {"keyword": "yank package version", "task": "pull libauth 2.3.1, it has a broken migration",
      "param": "package=libauth version=2.3.1 reason", "paraphrase": "withdraw a bad release"}, []),
    ("mobile", "submit_review", "Submit an app build to the App Store or Google Play for review.",
     [("app", "str", "App id."), ("build", "str", "Build number."), ("store", "str", "ios or android.")],
     {"keyword": "submit app store review", "task": "send build 4521 of the ios app to apple for review",
      "param": "app build store", "paraphrase": "ship the phone application to apple for approval"}, []),
    ("mobile", "crash_rate", "Show the crash-free sessions rate of a mobile app version.",
     [("app", "str", "App id."), ("version", "str", "Version.")],
     {"keyword": "mobile crash rate", "task": "is 5.2.0 of the android app crashing more than 5.1",
      "param": "app version", "paraphrase": "how stable is the latest phone release"}, []),
    ("analytics", "funnel", "Compute a conversion funnel over a list of event steps for a date range.",
     [("steps", "list", "Event names, in order."), ("start", "str", "First day."), ("end", "str", "Last day.")],
     {"keyword": "conversion funnel", "task": "how many visitors go from signup to first purchase last week",
      "param": "steps start end", "paraphrase": "where do visitors drop off"}, []),
    ("analytics", "top_pages", "List the most visited pages of a website for a period.",
     [("site", "str", "Website."), ("days", "int", "How many days back.")],
     {"keyword": "top pages visits", "task": "what were the most viewed pages on the blog in the last 7 days",
      "param": "site days", "paraphrase": "popular urls by traffic"}, []),
    ("forms", "export_responses", "Export the responses of a form as CSV.",
     [("form", "str", "Form id."), ("since", "str", "Only responses after this date.")],
     {"keyword": "export form responses", "task": "download all answers to the onboarding questionnaire",
      "param": "form since", "paraphrase": "get submissions into a spreadsheet"}, []),
    ("booking", "cancel", "Cancel a reservation and refund the deposit if allowed.",
     [("booking_id", "str", "Booking id."), ("reason", "str", "Why.")],
     {"keyword": "cancel booking", "task": "cancel reservation BK-88123, the guest is sick",
      "param": "booking_id=BK-88123 reason", "paraphrase": "call off an appointment and give the money back"}, []),
    ("booking", "availability", "Show free slots of a resource (room, desk, court) for a day.",
     [("resource", "str", "What to book."), ("date", "str", "Day.")],
     {"keyword": "room availability", "task": "is meeting room atlas free tomorrow afternoon",
      "param": "resource date", "paraphrase": "open times to reserve a space"}, []),
    ("fleet", "wipe", "Remotely wipe a lost or stolen managed laptop or phone.",
     [("device", "str", "Device serial or name."), ("confirm", "bool", "Really wipe it.")],
     {"keyword": "wipe device", "task": "anna's laptop was stolen, erase it, serial C02XK1",
      "param": "device confirm", "paraphrase": "erase a missing notebook from afar"}, []),
    ("fleet", "os_versions", "Count managed devices by operating system version.",
     [("platform", "str", "macos, windows, ios or android.")],
     {"keyword": "device os versions", "task": "how many macs are still on macos 13",
      "param": "platform", "paraphrase": "which laptops need upgrading"}, []),
    ("energy", "meter_readings", "Show a smart meter's readings for a period, in kWh.",
     [("meter", "str", "Meter id."), ("start", "str", "First day."), ("end", "str", "Last day.")],
     {"keyword": "meter readings kwh", "task": "electricity use of meter M-2231 in october",
      "param": "meter start end", "paraphrase": "how much power did the building draw"}, []),
    ("legal", "contract_expiry", "List contracts that end or renew within a number of days.",
     [("days", "int", "Window in days."), ("counterparty", "str", "Only contracts with this party.")],
     {"keyword": "contracts expiring renewal", "task": "which vendor agreements auto-renew next month",
      "param": "days counterparty", "paraphrase": "agreements coming up for renegotiation"}, []),
]  # fmt: skip

# group -> (what its tools work on, the objects its other tools handle, its params: (name, type, description))
GROUPS: dict[str, tuple[str, list[str], list[tuple[str, str, str]]]] = {
    "ldap": ("the LDAP directory", ["accounts", "groups", "organizational units", "service accounts",
             "password policies", "schemas"],
             [("uid", "str", "Account uid."), ("base_dn", "str", "Search base."), ("filter", "str", "LDAP filter."),
              ("group", "str", "Group cn."), ("bind_dn", "str", "Bind as this DN.")]),
    "sqs": ("SQS queues", ["queues", "messages", "dead-letter queues", "visibility timeouts", "subscriptions",
            "redrive policies"],
            [("queue", "str", "Queue name or URL."), ("region", "str", "AWS region."),
             ("max_messages", "int", "At most this many messages."), ("wait_seconds", "int", "Long-poll wait.")]),
    "nfs": ("NFS file servers", ["exports", "mounts", "clients", "locks", "quotas", "snapshots"],
            [("server", "str", "File server host."), ("path", "str", "Export or mount path."),
             ("client", "str", "Client host."), ("options", "str", "Mount options, e.g. ro,noatime.")]),
    "vm": ("virtual machines", ["guests", "snapshots", "disks", "network adapters", "hypervisors", "templates"],
           [("vm", "str", "VM name."), ("hypervisor", "str", "Hypervisor host."), ("cpus", "int", "Virtual CPUs."),
            ("memory_mb", "int", "Memory in MB."), ("datastore", "str", "Datastore.")]),
    "lb": ("load balancers", ["pools", "backends", "listeners", "certificates", "sticky sessions", "rate limits"],
           [("pool", "str", "Pool name."), ("backend", "str", "Backend address."),
            ("listener", "str", "Listener port."), ("weight", "int", "Backend weight.")]),
    "cassandra": ("Cassandra", ["keyspaces", "tables", "nodes", "compactions", "tombstones", "hints"],
                  [("keyspace", "str", "Keyspace."), ("table", "str", "Table."), ("host", "str", "Node address."),
                   ("consistency", "str", "Consistency level, e.g. QUORUM.")]),
    "elastic": ("Elasticsearch", ["indices", "shards", "aliases", "mappings", "snapshots", "ingest pipelines"],
                [("index", "str", "Index name or pattern."), ("cluster", "str", "Cluster name."),
                 ("alias", "str", "Alias."), ("shards", "int", "Number of shards.")]),
    "terraform": ("Terraform", ["workspaces", "state files", "providers", "modules", "outputs", "resources"],
                  [("workspace", "str", "Workspace name."), ("dir", "str", "Configuration directory."),
                   ("var_file", "str", "Variables file."), ("address", "str", "Resource address.")]),
    "ansible": ("Ansible", ["playbooks", "inventories", "roles", "vaults", "host variables", "collections"],
                [("inventory", "str", "Inventory file."), ("hosts", "str", "Host pattern."), ("role", "str", "Role."),
                 ("extra_vars", "dict", "Extra variables."), ("tags", "list", "Only these tags.")]),
    "flags": ("feature flags", ["flags", "segments", "environments", "targeting rules", "experiments", "audit entries"],
              [("flag", "str", "Flag key."), ("env", "str", "Environment."), ("segment", "str", "User segment."),
               ("variation", "str", "Variation served.")]),
    "secrets": ("the secrets store", ["secrets", "api keys", "access tokens", "encryption keys", "certificates",
                "service credentials"],
                [("name", "str", "Secret name."), ("path", "str", "Secret path."), ("version", "int", "Version."),
                 ("ttl", "str", "Lifetime, e.g. 30d.")]),
    "compliance": ("compliance controls", ["controls", "policies", "evidence", "exceptions", "risk register",
                   "vendor assessments"],
                   [("framework", "str", "Framework, e.g. soc2."), ("control", "str", "Control id."),
                    ("owner", "str", "Owner."), ("period", "str", "Audit period.")]),
    "oncall": ("on-call schedules", ["schedules", "rotations", "escalation policies", "incidents", "shifts",
               "responders"],
               [("team", "str", "Team name."), ("schedule", "str", "Schedule."), ("user", "str", "Responder."),
                ("since", "str", "From this time.")]),
    "finops": ("cloud costs", ["budgets", "invoices", "reservations", "savings plans", "cost anomalies", "tags"],
               [("account", "str", "Cloud account."), ("month", "str", "Month, YYYY-MM."),
                ("threshold", "float", "Amount in dollars."), ("tag", "str", "Cost allocation tag.")]),
    "buildcache": ("the build cache", ["entries", "artifacts", "namespaces", "nodes", "eviction policies",
                   "access logs"],
                   [("project", "str", "Project."), ("namespace", "str", "Cache namespace."),
                    ("key", "str", "Cache key."), ("days", "int", "Age in days.")]),
    "registry": ("the package registry", ["packages", "versions", "maintainers", "download counts", "mirrors",
                 "access tokens"],
                 [("package", "str", "Package name."), ("version", "str", "Version."), ("scope", "str", "Scope."),
                  ("registry", "str", "Registry URL.")]),
    "mobile": ("mobile apps", ["builds", "releases", "testers", "crash reports", "store listings", "push certificates"],
               [("app", "str", "App id."), ("platform", "str", "ios or android."), ("build", "str", "Build number."),
                ("track", "str", "Release track, e.g. beta.")]),
    "analytics": ("web analytics", ["dashboards", "events", "segments", "goals", "referrers", "sessions"],
                  [("site", "str", "Website."), ("start", "str", "First day."), ("end", "str", "Last day."),
                   ("dimension", "str", "Break down by this.")]),
    "forms": ("web forms", ["forms", "responses", "fields", "webhooks", "spam filters", "uploads"],
              [("form", "str", "Form id."), ("field", "str", "Field name."), ("since", "str", "From this date."),
               ("webhook", "str", "Webhook URL.")]),
    "booking": ("bookings", ["reservations", "rooms", "slots", "waitlists", "deposits", "reminders"],
                [("booking_id", "str", "Booking id."), ("resource", "str", "Room or desk."), ("date", "str", "Day."),
                 ("guest", "str", "Guest name or email.")]),
    "fleet": ("managed devices", ["laptops", "phones", "enrollment profiles", "compliance policies", "apps",
              "encryption status"],
              [("device", "str", "Device serial or name."), ("owner", "str", "Owner."),
               ("platform", "str", "Platform."), ("profile", "str", "Profile.")]),
    "energy": ("energy meters", ["meters", "readings", "tariffs", "solar panels", "batteries", "peak loads"],
               [("meter", "str", "Meter id."), ("site", "str", "Site."), ("interval", "str", "e.g. 15m or 1h."),
                ("start", "str", "First day.")]),
    "legal": ("legal documents", ["contracts", "ndas", "signatures", "clauses", "matters", "retention holds"],
              [("contract", "str", "Contract id."), ("counterparty", "str", "Other party."),
               ("status", "str", "draft, signed or expired."), ("owner", "str", "Owner.")]),
}  # fmt: skip

VERBS = ("list", "show", "count", "check", "export", "update", "delete", "watch")
# several phrasings per verb: a distractor's description picks one (seeded)
PHRASES: dict[str, tuple[str, ...]] = {
    "list": ("List the {o} of {d}.", "Print every one of the {o} in {d}, one a line.", "Enumerate {d}'s {o}."),
    "show": ("Show details of one of the {o} of {d}.", "Print the settings of the {o} of {d}.",
             "Display the {o} in {d} with their properties."),
    "count": ("Count the {o} of {d} and print totals.", "Print how many {o} {d} holds, grouped by state.",
              "Totals of {o} across {d}."),
    "check": ("Check the {o} of {d} for problems.", "Validate the {o} in {d} and report errors.",
              "Look for misconfigured {o} in {d}."),
    "export": ("Export the {o} of {d} as JSON.", "Dump the {o} of {d} to a CSV file.",
               "Write the {o} of {d} to a file for later import."),
    "update": ("Change a setting of the {o} of {d}.", "Edit the {o} in {d} in place.",
               "Apply new values to the {o} of {d}."),
    "delete": ("Remove some of the {o} from {d}.", "Delete {o} of {d} that match a filter.",
               "Clean out unused {o} from {d}."),
    "watch": ("Watch the {o} of {d} and print changes as they happen.", "Follow changes to the {o} in {d} live.",
              "Stream events about the {o} of {d}."),
}  # fmt: skip
VERB_PARAMS: dict[str, list[tuple[str, str, str]]] = {
    "list": [("limit", "int", "How many at most."), ("sort", "str", "Sort by this field.")],
    "show": [("id", "str", "Which one.")],
    "count": [("group_by", "str", "Group totals by this field.")],
    "check": [("strict", "bool", "Treat warnings as errors.")],
    "export": [("format", "str", "json or csv."), ("output", "str", "File to write.")],
    "update": [("values", "dict", "New values."), ("dry_run", "bool", "Only print what would change.")],
    "delete": [("older_than", "str", "Only ones older than this, e.g. 30d."), ("force", "bool", "Do not ask.")],
    "watch": [("interval", "int", "Seconds between polls."), ("duration", "str", "Stop after this long.")],
}


def distractors() -> list[tuple[str, str, str, list[tuple[str, str, str]]]]:
    """Every verb on every object of every group (the intents' keys skipped), named verb-first or noun-first, one of
    several descriptions, params from the group's own and the verb's."""
    rng = random.Random(2026)
    taken = {(g, n) for g, n, *_ in INTENTS}
    out = []
    for group, (domain, objects, params) in GROUPS.items():
        for obj in objects:
            slug = obj.replace(" ", "_").replace("-", "_")
            for verb in VERBS:
                name = f"{verb}_{slug}" if rng.random() < 0.7 else f"{slug}_{verb}"
                if (group, name) in taken:
                    continue
                desc = rng.choice(PHRASES[verb]).format(o=obj, d=domain)
                chosen = rng.sample(params, rng.randint(1, min(3, len(params))))
                chosen += rng.sample(VERB_PARAMS[verb], rng.randint(0, len(VERB_PARAMS[verb])))
                out.append((group, name, desc, list({p[0]: p for p in chosen}.values())))  # a name once
    return out


NEIGHBOURS = dict(zip("qwertyuiopasdfghjklzxcvbnm", "wqrtyuiopoadfghjklkxcvbnmn", strict=True))


def typo(query: str, key: str) -> str:
    """One seeded random edit (swap, drop, doubling, neighbouring key, inserted letter) of one word of 4+ letters."""
    rng = random.Random(f"dev-2 {key}")
    words = query.split()
    long = [i for i, w in enumerate(words) if len(w) >= 4] or [max(range(len(words)), key=lambda i: len(words[i]))]
    while True:  # an edit that leaves the word as it was (a letter swapped with its twin) is drawn again
        i = rng.choice(long)
        edited = edit(words[i], rng)
        if edited != words[i]:
            words[i] = edited
            return " ".join(words)


def edit(w: str, rng: random.Random) -> str:
    at = rng.randint(1, len(w) - 2) if len(w) > 2 else 0
    kind = rng.choice(("swap", "drop", "double", "neighbour", "insert"))
    if kind == "swap":
        return w[:at] + w[at + 1 : at + 2] + w[at] + w[at + 2 :]
    if kind == "drop":
        return w[:at] + w[at + 1 :]
    if kind == "double":
        return w[:at] + w[at] + w[at:]
    if kind == "neighbour":
        return w[:at] + NEIGHBOURS.get(w[at], w[at]) + w[at + 1 :]
    return w[:at] + rng.choice("aeioulnrst") + w[at:]
