"""The held-out search set: a catalog and queries made apart from the dev set, never tuned on.

Nothing here shares a group, a tool or a query with bench/search_eval_data.py (the dev set): other
domains (mail, billing, CRM, media, machine learning, shops, IoT, ...), other words, and other
procedures. Ranking changes are decided on the dev set only; this set only reports.

- The 48 intents below were written by hand, each with a keyword, a task, a param and a
  paraphrase query, before any ranking was run on them, and were not changed afterwards (except
  where the paraphrase check below refused one, before any score was seen).
- Param queries come in two styles: param names, and `name=value` pairs as an agent holding a
  value writes them.
- A paraphrase shares no content word, after stemming, with its tool's key, name, description,
  param names and descriptions (`paraphrase_overlap`: search_eval.py refuses to score a set
  where one does).
- Typo queries are made by a different procedure than dev's: a seeded random edit (insert,
  delete, substitute or swap) of a random content word of four letters or more.
- Around the intents, distractors of the same groups are generated noun-first (`invoice_archive`,
  `invoice_audit`), with descriptions from several sentence shapes and params from a pool.
"""

from __future__ import annotations

import hashlib
import random

# (group, name, description, [(param, type, description)], {kind: query}, [also acceptable keys])
Intent = tuple[str, str, str, list[tuple[str, str, str]], dict[str, str], list[str]]

INTENTS: list[Intent] = [
    ("mail", "send_message", "Send an email message to one or more recipients.",
     [("to", "list", "Recipient addresses."), ("subject", "str", "Subject line."), ("body", "str", "Message text.")],
     {"keyword": "send email", "task": "email the weekly report to ops@example.com",
      "param": "to subject body", "paraphrase": "write to a colleague's inbox"}, []),
    ("mail", "search_inbox", "Search a mailbox for messages matching sender, subject or date.",
     [("mailbox", "str", "Mailbox name."), ("sender", "str", "Sender address."), ("since", "str", "Earliest date.")],
     {"keyword": "search inbox", "task": "find the mail from alice about the contract last week",
      "param": "sender=alice@example.com since=2026-01-01", "paraphrase": "look through received letters"}, []),
    ("mail", "bounce_report", "List messages that could not be delivered, with the remote server's reason.",
     [("days", "int", "Look back this many days.")],
     {"keyword": "bounced emails", "task": "why did our newsletter not reach some customers",
      "param": "days bounce", "paraphrase": "undeliverable correspondence"}, []),
    ("calendar", "create_event", "Create a calendar event with attendees.",
     [("title", "str", "Event title."), ("start", "str", "Start time, ISO 8601."),
      ("attendees", "list", "Email addresses to invite.")],
     {"keyword": "create calendar event", "task": "book a meeting with the design team on friday at 10",
      "param": "title start attendees", "paraphrase": "schedule a get-together"}, []),
    ("calendar", "free_slots", "Find free time slots shared by several people's calendars.",
     [("people", "list", "Whose calendars."), ("duration", "int", "Minutes needed.")],
     {"keyword": "free slots", "task": "when can bob, carol and I all meet next week",
      "param": "people=bob,carol duration=30", "paraphrase": "common availability across colleagues"}, []),
    ("billing", "create_invoice", "Create an invoice for a customer with line items.",
     [("customer", "str", "Customer id."), ("items", "list", "Line items: description and amount."),
      ("due", "str", "Due date.")],
     {"keyword": "create invoice", "task": "bill acme corp for 20 hours of consulting",
      "param": "customer items due", "paraphrase": "charge a client for work done"}, []),
    ("billing", "refund", "Refund a payment fully or in part.",
     [("payment_id", "str", "The payment to refund."),
      ("amount", "int", "Amount in cents; the whole payment when omitted.")],
     {"keyword": "refund payment", "task": "give the customer their money back for order 1182",
      "param": "payment_id=pi_3 amount=500", "paraphrase": "return funds to a buyer"}, []),
    ("billing", "overdue", "List unpaid invoices past their due date.",
     [("days", "int", "At least this many days late.")],
     {"keyword": "overdue invoices", "task": "who still owes us money",
      "param": "days late", "paraphrase": "outstanding receivables nobody settled"}, []),
    ("crm", "add_contact", "Add a contact person to the CRM with name, email and company.",
     [("name", "str", "Full name."), ("email", "str", "Email."), ("company", "str", "Employer.")],
     {"keyword": "add contact", "task": "save the new lead jane doe from globex",
      "param": "name email company", "paraphrase": "store details about a new acquaintance"}, []),
    ("crm", "deal_pipeline", "Show open deals by stage with their expected value.",
     [("owner", "str", "Account manager."), ("stage", "str", "Only this stage.")],
     {"keyword": "deal pipeline", "task": "how much revenue is likely to close this quarter",
      "param": "owner=dana stage=negotiation", "paraphrase": "sales opportunities in progress"}, []),
    ("tickets", "open_ticket", "Open a support ticket with a title, priority and description.",
     [("title", "str", "Short summary."), ("priority", "str", "low, normal, high or urgent."),
      ("text", "str", "What happened.")],
     {"keyword": "open support ticket", "task": "report that the checkout page is broken to the helpdesk",
      "param": "title priority text", "paraphrase": "file a complaint with customer service"}, []),
    ("tickets", "assign", "Assign a ticket to an agent or a team.",
     [("ticket", "str", "Ticket number."), ("assignee", "str", "Agent or team.")],
     {"keyword": "assign ticket", "task": "give issue 8812 to the billing team",
      "param": "ticket=8812 assignee=billing", "paraphrase": "hand a case over to a colleague"}, []),
    ("tickets", "sla_breaches", "List tickets that missed their response or resolution deadline.",
     [("since", "str", "Start of the period.")],
     {"keyword": "sla breaches", "task": "which support requests were answered too late this month",
      "param": "since deadline", "paraphrase": "promises to customers we failed to keep"}, []),
    ("chat", "post_message", "Post a message to a chat channel.",
     [("channel", "str", "Channel name."), ("text", "str", "Message text.")],
     {"keyword": "post chat message", "task": "tell the #deploys channel that the release is out",
      "param": "channel=deploys text=done", "paraphrase": "announce something to the team room"}, []),
    ("chat", "export_history", "Export a channel's conversation history to a file.",
     [("channel", "str", "Channel name."), ("since", "str", "Earliest day."), ("format", "str", "json or csv.")],
     {"keyword": "export chat history", "task": "archive everything said in #incident-42 for the postmortem",
      "param": "channel since format", "paraphrase": "save the transcript of a discussion"}, []),
    ("media", "transcode", "Convert a video file to another codec or resolution.",
     [("input", "str", "Source video."), ("codec", "str", "h264, h265 or av1."),
      ("height", "int", "Output height in pixels.")],
     {"keyword": "transcode video", "task": "make a 720p version of the launch clip for mobile",
      "param": "codec=av1 height=720", "paraphrase": "re-encode a movie for smaller screens"}, []),
    ("media", "thumbnail", "Generate a thumbnail image from a video at a given time.",
     [("video", "str", "Source video."), ("timestamp", "str", "When, e.g. 00:01:30."),
      ("width", "int", "Thumbnail width.")],
     {"keyword": "video thumbnail", "task": "grab a still frame for the blog post preview",
      "param": "timestamp width", "paraphrase": "poster picture for a clip"}, []),
    ("media", "resize_images", "Resize a batch of images to a maximum width and height.",
     [("folder", "str", "Folder with the images."), ("max_width", "int", "Widest allowed."),
      ("max_height", "int", "Tallest allowed.")],
     {"keyword": "resize images", "task": "shrink all the product photos to 800 pixels wide",
      "param": "max_width=800 folder=photos", "paraphrase": "make pictures smaller in bulk"}, []),
    ("ml", "train_model", "Start a training run for a model on a dataset.",
     [("dataset", "str", "Dataset name."), ("epochs", "int", "Passes over the data."),
      ("learning_rate", "float", "Step size.")],
     {"keyword": "train model", "task": "fit the churn classifier on last month's data",
      "param": "dataset epochs learning_rate", "paraphrase": "teach the network from examples"}, []),
    ("ml", "predict", "Run a model on input records and return predictions.",
     [("model", "str", "Model name."), ("records", "list", "Input records.")],
     {"keyword": "model prediction", "task": "score these five customers with the churn model",
      "param": "model=churn records=[...]", "paraphrase": "infer outcomes for new rows"}, []),
    ("ml", "drift_report", "Compare recent input data with the training data and report feature drift.",
     [("model", "str", "Model name."), ("window", "str", "Recent period, e.g. 7d.")],
     {"keyword": "feature drift", "task": "check whether production inputs still look like what the model learned on",
      "param": "window model", "paraphrase": "distribution shift in incoming samples"}, []),
    ("warehouse", "run_query", "Run a SQL query on the data warehouse and return rows.",
     [("sql", "str", "The query."), ("limit", "int", "Most rows.")],
     {"keyword": "warehouse sql query", "task": "count yesterday's signups from the events table",
      "param": "sql=select limit=100", "paraphrase": "ask the analytics store a question"}, []),
    ("warehouse", "table_freshness", "Show when each warehouse table was last loaded.",
     [("schema", "str", "Only this schema.")],
     {"keyword": "table freshness", "task": "is the orders table up to date or did the load stop",
      "param": "schema loaded", "paraphrase": "stale datasets"}, []),
    ("etl", "rerun_job", "Rerun a failed ETL job from the step that failed.",
     [("job", "str", "Job name."), ("from_step", "str", "Step to start from.")],
     {"keyword": "rerun etl job", "task": "restart the nightly import that broke at the transform step",
      "param": "job=nightly from_step=transform", "paraphrase": "retry a broken data pipeline"}, []),
    ("etl", "job_history", "List recent runs of an ETL job with durations and outcomes.",
     [("job", "str", "Job name."), ("limit", "int", "How many runs.")],
     {"keyword": "etl job history", "task": "how long did the sales sync take over the last week",
      "param": "job limit runs", "paraphrase": "past executions of a scheduled import"}, []),
    ("iot", "device_status", "Show whether IoT devices are online, with battery and signal.",
     [("site", "str", "Only devices at this site.")],
     {"keyword": "iot device status", "task": "which sensors in the warehouse have gone offline",
      "param": "site battery", "paraphrase": "are the gadgets connected"}, []),
    ("iot", "firmware_update", "Push a firmware update to a group of devices.",
     [("devices", "list", "Device ids."), ("version", "str", "Firmware version.")],
     {"keyword": "firmware update", "task": "roll out version 2.4 to every thermostat",
      "param": "devices=t1,t2 version=2.4", "paraphrase": "upgrade the embedded software on sensors"}, []),
    ("print", "queue", "Show the jobs waiting in a printer queue.",
     [("printer", "str", "Printer name.")],
     {"keyword": "printer queue", "task": "why is my document not coming out of the office printer",
      "param": "printer jobs", "paraphrase": "pending pages"}, []),
    ("search", "reindex", "Rebuild a search index from its source documents.",
     [("index", "str", "Index name."), ("batch_size", "int", "Documents per batch.")],
     {"keyword": "reindex search", "task": "the product search shows old prices, rebuild it",
      "param": "index=products batch_size=500", "paraphrase": "refresh the full-text lookup catalog"}, []),
    ("search", "slow_queries", "List the slowest search queries with their timing.",
     [("min_ms", "int", "Only queries slower than this.")],
     {"keyword": "slow search queries", "task": "what searches take more than a second",
      "param": "min_ms", "paraphrase": "sluggish lookups"}, []),
    ("cdn", "purge", "Purge cached copies of URLs from the CDN edge.",
     [("urls", "list", "URLs or prefixes.")],
     {"keyword": "cdn purge", "task": "the new logo still shows the old version on the site, clear it",
      "param": "urls=https://example.com/logo.png", "paraphrase": "force visitors to receive the latest assets"},
     []),
    ("cdn", "hit_ratio", "Show the cache hit ratio of CDN edges per region.",
     [("region", "str", "Only this region.")],
     {"keyword": "cdn hit ratio", "task": "how much traffic is served from the edge instead of origin",
      "param": "region", "paraphrase": "share of requests answered without the backend"}, []),
    ("payments", "dispute_list", "List open card disputes and chargebacks with their deadlines.",
     [("status", "str", "Only disputes in this status.")],
     {"keyword": "payment disputes", "task": "which chargebacks do we need to respond to this week",
      "param": "status deadline", "paraphrase": "contested transactions"}, []),
    ("payments", "payout_schedule", "Show upcoming payouts to the bank account and their dates.",
     [("currency", "str", "Only this currency.")],
     {"keyword": "payout schedule", "task": "when will the money from sales land in our bank",
      "param": "currency=eur", "paraphrase": "next transfers of earnings"}, []),
    ("hr", "leave_balance", "Show an employee's remaining vacation and sick leave days.",
     [("employee", "str", "Employee id.")],
     {"keyword": "leave balance", "task": "how many holidays does maria have left this year",
      "param": "employee", "paraphrase": "time off still available to a worker"}, []),
    ("hr", "onboard", "Start onboarding for a new hire: accounts, laptop and first-week schedule.",
     [("name", "str", "Full name."), ("start_date", "str", "First day."), ("role", "str", "Job title.")],
     {"keyword": "onboard new hire", "task": "set up everything for the engineer who joins on monday",
      "param": "name start_date role", "paraphrase": "welcome a recruit"}, []),
    ("docs", "publish_page", "Publish a wiki page from markdown.",
     [("space", "str", "Wiki space."), ("title", "str", "Page title."), ("markdown", "str", "Page content.")],
     {"keyword": "publish wiki page", "task": "put the runbook I wrote on the internal knowledge base",
      "param": "space=ops title=runbook", "paraphrase": "share an article on the intranet"}, []),
    ("docs", "broken_links", "Find links in wiki pages that point to missing pages or sites.",
     [("space", "str", "Wiki space.")],
     {"keyword": "broken links", "task": "which documentation pages link to things that no longer exist",
      "param": "space", "paraphrase": "dead references in articles"}, []),
    ("translate", "text", "Translate text into another language.",
     [("text", "str", "What to translate."), ("target", "str", "Target language code.")],
     {"keyword": "translate text", "task": "put this paragraph into german",
      "param": "text target", "paraphrase": "render a sentence in spanish"}, []),
    ("geo", "geocode", "Turn a street address into latitude and longitude.",
     [("address", "str", "Street address.")],
     {"keyword": "geocode address", "task": "get the coordinates of 10 downing street",
      "param": "address=10 downing street", "paraphrase": "where on the map is this place"}, []),
    ("geo", "distance", "Compute the travel distance and time between two places.",
     [("origin", "str", "Start."), ("destination", "str", "End."), ("mode", "str", "driving, walking or cycling.")],
     {"keyword": "travel distance", "task": "how long does it take to drive from lyon to paris",
      "param": "origin destination mode", "paraphrase": "how far apart are a pair of cities"}, []),
    ("audio", "transcribe", "Transcribe speech in an audio file to text.",
     [("file", "str", "Audio file."), ("language", "str", "Spoken language.")],
     {"keyword": "transcribe audio", "task": "write down what was said in the recording of the board meeting",
      "param": "file=board.mp3 language=en", "paraphrase": "turn a voice memo into words"}, []),
    ("shop", "low_stock", "List products whose stock is below their reorder level.",
     [("location", "str", "Only this location."), ("threshold", "int", "Units at or below which to list.")],
     {"keyword": "low stock", "task": "which items do we need to order more of",
      "param": "threshold reorder", "paraphrase": "inventory running short"}, []),
    ("shop", "abandoned_carts", "List shopping carts abandoned before checkout, with their value.",
     [("hours", "int", "Abandoned at least this many hours ago.")],
     {"keyword": "abandoned carts", "task": "find customers who left without paying so we can send a reminder",
      "param": "hours=24", "paraphrase": "baskets people left behind"}, []),
    ("shop", "update_price", "Change the price of a product.",
     [("sku", "str", "Product SKU."), ("price", "int", "New price in cents.")],
     {"keyword": "update product price", "task": "make the blue mug cost 12 dollars",
      "param": "sku=MUG-BLUE price=1200", "paraphrase": "adjust what an item costs"}, []),
    ("survey", "results", "Summarise the answers to a survey.",
     [("survey_id", "str", "The survey.")],
     {"keyword": "survey results", "task": "what did employees say in the engagement questionnaire",
      "param": "survey_id", "paraphrase": "feedback form responses"}, []),
    ("vpn", "active_sessions", "List users connected to the VPN with their address and duration.",
     [("gateway", "str", "Only this gateway.")],
     {"keyword": "vpn sessions", "task": "who is on the vpn right now",
      "param": "gateway", "paraphrase": "remote workers logged in to the private network"}, []),
    ("licenses", "expiring", "List software licenses that expire within a number of days.",
     [("days", "int", "Within this many days.")],
     {"keyword": "expiring licenses", "task": "which subscriptions do we need to renew next month",
      "param": "days", "paraphrase": "seats about to lapse"}, []),
]  # fmt: skip

# Function words the paraphrase check ignores (a fixed copy: a ranker's stop list may change, the check does not).
_CHECK_STOP = (
    "a about after again all almost also am an and any anything are as at be been before being both but "
    "by can could did do does each else every everything find for from had has have here how i if in "
    "into is it its just many me more most much my nor not now of on only or other our out own please "
    "same should so some something than that the their them then there these this those to too tool "
    "tools us very want was we what when where whether which while who whose why will with would yet you "
    "your"
)
CHECK_STOP_WORDS = frozenset(_CHECK_STOP.split(" "))

# group -> (what it is about, nouns its other tools handle)
DOMAINS: dict[str, tuple[str, list[str]]] = {
    "mail": ("the mail system", ["mailbox", "alias", "attachment", "spam filter", "signature", "draft"]),
    "calendar": ("calendars", ["event", "reminder", "room booking", "time zone", "invitation"]),
    "billing": ("billing", ["invoice", "credit note", "tax rate", "subscription", "coupon", "statement"]),
    "crm": ("the CRM", ["contact", "deal", "lead", "account", "note", "activity"]),
    "tickets": ("the helpdesk", ["ticket", "macro", "queue", "tag", "satisfaction rating"]),
    "chat": ("team chat", ["channel", "thread", "emoji", "bot", "webhook", "pin"]),
    "media": ("the media library", ["video", "image", "playlist", "subtitle", "album"]),
    "ml": ("machine learning", ["model", "experiment", "feature store", "dataset", "checkpoint"]),
    "warehouse": ("the data warehouse", ["table", "view", "schema", "column", "partition"]),
    "etl": ("data pipelines", ["job", "connector", "source", "sink", "schedule"]),
    "iot": ("connected devices", ["device", "sensor", "gateway", "firmware", "telemetry"]),
    "print": ("printers", ["printer", "toner", "print job", "paper tray"]),
    "search": ("the search engine", ["index", "synonym list", "ranking rule", "facet", "replica"]),
    "cdn": ("the CDN", ["edge", "origin", "cache rule", "certificate", "bandwidth report"]),
    "payments": ("card payments", ["charge", "payout", "dispute", "customer", "payment method"]),
    "hr": ("human resources", ["employee", "leave request", "payslip", "review", "org chart"]),
    "docs": ("the wiki", ["page", "space", "attachment", "comment", "template"]),
    "translate": ("translation", ["glossary", "memory", "language pair", "job"]),
    "geo": ("maps", ["address", "route", "region", "place", "tile"]),
    "audio": ("audio", ["recording", "podcast", "transcript", "voice", "clip"]),
    "shop": ("the online shop", ["product", "order", "cart", "discount", "shipment", "review"]),
    "survey": ("surveys", ["survey", "question", "respondent", "invitation"]),
    "vpn": ("the VPN", ["session", "client", "gateway", "certificate"]),
    "licenses": ("software licenses", ["license", "seat", "vendor", "renewal"]),
}
ACTIONS = ("archive", "audit", "import", "tag", "merge", "summarise", "clone", "lock", "rename")
SHAPES = (
    "{A} a {n} in {d}.",
    "{A}s one {n} of {d} by id.",
    "Use this to {a} {n}s of {d}; prints what changed.",
    "For {d}: {a} the chosen {n}s and report the outcome.",
)
PARAM_POOL = (
    ("id", "str", "Identifier."),
    ("dry_run", "bool", "Only print what would happen."),
    ("owner", "str", "Who it belongs to."),
    ("reason", "str", "Why, for the audit trail."),
    ("page", "int", "Result page."),
)


def distractors() -> list[tuple[str, str, str, list[tuple[str, str, str]]]]:
    taken = {(g, n) for g, n, *_ in INTENTS}
    out = []
    for group, (domain, nouns) in DOMAINS.items():
        for noun in nouns:
            for action in ACTIONS:
                name = f"{noun.replace(' ', '_')}_{action}"
                if (group, name) in taken:
                    continue
                seed = int.from_bytes(hashlib.sha256(f"{group}.{name}".encode()).digest()[:4], "big")
                shape = SHAPES[seed % len(SHAPES)]
                desc = shape.format(A=action.capitalize(), a=action, n=noun, d=domain)
                params = [PARAM_POOL[(seed >> (4 * i)) % len(PARAM_POOL)] for i in range(1 + seed % 3)]
                out.append((group, name, desc, list(dict.fromkeys(params))))
    return out


def typo(query: str) -> str:
    """A seeded random edit (insert, delete, substitute, swap) of a random word of four letters or more."""
    rng = random.Random(hashlib.sha256(query.encode()).digest())
    words = query.split()
    long = [i for i, w in enumerate(words) if len(w) >= 4 and w.isalpha()] or [max(range(len(words)))]
    i = rng.choice(long)
    w = words[i]
    at = rng.randrange(1, len(w) - 1) if len(w) > 2 else 0
    kind = rng.randrange(4)
    letter = rng.choice("abcdefghijklmnopqrstuvwxyz")
    if kind == 0:
        w = w[:at] + letter + w[at:]
    elif kind == 1:
        w = w[:at] + w[at + 1 :]
    elif kind == 2:
        w = w[:at] + (letter if letter != w[at] else "x") + w[at + 1 :]
    else:
        w = w[: at - 1] + w[at] + w[at - 1] + w[at + 1 :] if at else w[1] + w[0] + w[2:]
    words[i] = w
    return " ".join(words)
