"""What the docs and the configs' comments point to exists: every repository path named in docs/**/*.md, README.md
and the comments of config/**/*.yaml, and every Markdown link between the docs with its anchor. The reference pages
stay in the present tense: dated runs live in docs/results/, and no page cites an issue number."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
CONFIGS = sorted((ROOT / "config").rglob("*.yaml"))
# a path is the repository's when its first part is one of the repository's own top-level directories; others
# (runs/..., <out>/..., /dev/shm, field/...) are paths a run makes, and a checkout may hold them too
TOP = (
    "benchmarks",
    "config",
    "docs",
    "edge",
    "launch",
    "resource",
    "ros_nodes",
    "sim",
    "sim2real",
    "tests",
    "training",
)
# files the docs tell a user to write (a robot's own PPO defaults, a task YAML for a robot brought by `robot init`)
USER_FILES = {"config/ppo/my_robot.yaml", "config/tasks/velocity_crawler.yaml"}
PATH = re.compile(rf"(?<![\w./<>*-])((?:{'|'.join(map(re.escape, TOP))})/[\w./<>*-]*\w)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
ISSUE = re.compile(r"\bissues? #?\d+|\(#\d+\)", re.I)


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code (an example's file name or timestamp is not a claim)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def comments(text: str) -> str:
    """A YAML file's comments: what follows a # at a line's start or after a space."""
    return "\n".join(m.group(1) for m in re.finditer(r"(?:^|\s)#(.*)$", text, re.M))


def exists(path: str) -> bool:
    """The path exists; a <placeholder> or * in it stands for any name, so at least one file must match."""
    path = path.rstrip(".")
    if "<" in path or "*" in path:
        return any(ROOT.glob(re.sub(r"<[^>]*>|\*", "*", path)))
    return (ROOT / path).exists()


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    return {slug(h) for h in re.findall(r"^#+ (.*)$", text, re.M)}


def named_paths():
    for doc in DOCS:
        for path in PATH.findall(doc.read_text()):
            yield rel(doc), path
    for config in CONFIGS:
        for path in PATH.findall(comments(config.read_text())):
            yield rel(config), path


def test_every_repository_path_named_in_the_docs_and_config_comments_exists():
    named = list(named_paths())
    assert all((ROOT / top).is_dir() for top in TOP) and len(named) > 100  # the pattern still finds its paths
    missing = sorted({f"{where}: {path}" for where, path in named if path not in USER_FILES and not exists(path)})
    assert not missing, "paths that do not exist:\n" + "\n".join(missing)


def test_every_link_between_the_docs_reaches_its_page_and_heading():
    broken = []
    for doc in DOCS:
        for target in LINK.findall(doc.read_text()):
            if re.match(r"[a-z]+:", target):  # a URL
                continue
            file, _, anchor = target.partition("#")
            page = (doc.parent / file).resolve() if file else doc
            if not page.exists():
                broken.append(f"{rel(doc)}: {target} (no such file)")
            elif anchor and page.suffix == ".md" and anchor not in anchors(page):
                broken.append(f"{rel(doc)}: {target} (no such heading in {rel(page)})")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("doc", [d for d in DOCS if "results" not in d.parts], ids=rel)
def test_reference_pages_hold_no_dated_runs_and_cite_no_issues(doc):
    text = prose(doc.read_text())
    dated = [line for line in text.splitlines() if DATE.search(line)]
    assert not dated, f"{rel(doc)}: dated lines belong in docs/results/:\n" + "\n".join(dated)
    assert not ISSUE.findall(text), f"{rel(doc)} cites an issue: {ISSUE.findall(text)}"


def test_the_results_pages_cite_no_issues_either():
    cited = {rel(d): ISSUE.findall(d.read_text()) for d in DOCS if "results" in d.parts}
    assert cited and not any(cited.values()), cited


def test_the_checks_catch_what_they_are_for():
    assert PATH.findall("see edge/instruct/slots.py, runs/x.py and `config/tasks/velocity_<robot>.yaml`.") == [
        "edge/instruct/slots.py",
        "config/tasks/velocity_<robot>.yaml",
    ]
    assert not exists("training/rlhf/slots.py") and exists("config/tasks/velocity_<robot>.yaml")
    assert comments("a: 1  # sim2real/retrain/pipeline.py\n# b\nc: '#x'\n") == " sim2real/retrain/pipeline.py\n b"
    assert slug("Budgets (`config/retrain/retrain.yaml`)") == "budgets-configretrainretrainyaml"
    assert DATE.search(prose("measured 2026-12-01")) and not DATE.search(prose("`runs/2026-11-30_10-00-00`"))
    assert ISSUE.findall("as issue 18 asked (#36)") == ["issue 18", "(#36)"]
    assert not ISSUE.findall("slots #1..#9, [node](deploy-jetson.md#8-the-instruction-model)")
