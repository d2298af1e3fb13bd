"""The v2 engine's capabilities used by rule files, one at a time, on rules written here: a fix
per list item (`each`), a computed flag name, the `has` operator."""
from __future__ import annotations

import textwrap

import pytest

from diag import explain as X
from diag.analyze import Options, analyze_with_facts
from diag.rules import conditions as C
from diag.rules import engine as E
from diag.rules import schema as S
from diag.rules.registry import load


def _explainer(ctx, **_):
    return X.Values(values={
        "renames": [{"flag": "--tp-size", "value": "2", "switch": False, "written": "--tensor-parallel-size"},
                    {"flag": "--enable-metrics", "switch": True, "written": "--enable_metrics"},
                    {"flag": "", "written": "--use-v2-block-manager"}],
        "backend": {"flag": "--prefill-attention-backend", "pick": "triton"},
        "nothing": {"flag": None},
        "names": ["self.page_size", "set_mamba_track_indices_from_reqs"],
    })


@pytest.fixture
def testx(monkeypatch):
    table = dict(X.explainers())
    table["testx"] = X.Explainer("testx", _explainer, ("renames", "backend.*", "nothing.*", "names"))
    monkeypatch.setattr(X, "_EXPLAINERS", table)


def _rules(tmp_path, body: str):
    d = tmp_path / "config"
    d.mkdir()
    (d / "SGL-CFG-900-test.toml").write_text(textwrap.dedent('''
        id = "SGL-CFG-900"
        slug = "test"
        category = "config.unknown_flag"
        title = "t"
        explainers = ["testx"]
        [match]
        where = [{fact = "state", present = true}]
    ''') + textwrap.dedent(body), encoding="utf-8")
    return load(tmp_path, check_messages=False)


def _facts(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("launch_server.py: error: unrecognized arguments: --tensor-parallel-size 2\n", encoding="utf-8")
    return analyze_with_facts([str(log)], options=Options())[1]


def test_a_fix_per_list_item_with_item_conditions(tmp_path, testx):
    reg = _rules(tmp_path, '''
        [[fix]]
        option = "rename"
        each = "testx.renames"
        flag = "{item.flag}"
        value = "{item.value}"
        why = "{item.written} is spelled {item.flag}"
        when = [{fact = "item.switch", eq = false}]
        [[fix]]
        option = "rename"
        each = "testx.renames"
        flag = "{item.flag}"
        why = "a switch"
        when = [{fact = "item.switch", eq = true}]
    ''')
    f = E.evaluate(reg, _facts(tmp_path))[0]
    got = [(x.flag, x.value, x.direction, x.why) for x in f.fix]
    assert got == [("--tp-size", "2", "set", "--tensor-parallel-size is spelled --tp-size"),
                   ("--enable-metrics", None, "on", "a switch")]
    assert {x.option for x in f.fix} == {1}            # one option: the items are changed together


def test_a_computed_flag_that_renders_to_no_flag_gives_no_fix(tmp_path, testx):
    reg = _rules(tmp_path, '''
        [[fix]]
        option = "backend"
        flag = "{testx.backend.flag}"
        value = "{testx.backend.pick}"
        [[fix]]
        option = "none"
        flag = "{testx.nothing.flag}"
        value = "x"
    ''')
    f = E.evaluate(reg, _facts(tmp_path))[0]
    assert [(x.flag, x.value) for x in f.fix] == [("--prefill-attention-backend", "triton")]


def test_item_paths_are_rejected_outside_a_fix_with_each(tmp_path, testx):
    with pytest.raises(S.RuleError, match="item.flag"):
        _rules(tmp_path, '''
            [[fix]]
            option = "x"
            flag = "{item.flag}"
        ''')


def test_a_computed_flag_is_one_placeholder(tmp_path, testx):
    with pytest.raises(S.RuleError, match="one placeholder"):
        _rules(tmp_path, '''
            [[fix]]
            option = "x"
            flag = "--{testx.backend.flag}"
        ''')


def test_each_names_a_known_path(tmp_path, testx):
    with pytest.raises(S.RuleError, match="each"):
        _rules(tmp_path, '''
            [[fix]]
            option = "x"
            each = "testx.missing"
            flag = "{item.flag}"
        ''')


@pytest.mark.parametrize("value,patterns,want", [
    (["self.page_size", "set_mamba_track_indices_from_reqs"], ["*mamba_track*"], True),
    (["self.page_size"], ["page_size"], False),
    (["self.page_size"], ["*page_size"], True),
    ("mamba_track_interval", ["mamba_track_interval"], True),
    ([], ["x"], False),
    (None, ["x"], False),
    (3, ["3"], False),
])
def test_has(value, patterns, want):
    cond = C.parse({"fact": "names", "has": patterns}, "test")
    assert C.holds(cond, lambda p: value, lambda n: None, lambda v: True) is want


def test_has_takes_a_list_of_names():
    with pytest.raises(C.ConditionError):
        C.parse({"fact": "names", "has": "x"}, "test")
    with pytest.raises(C.ConditionError):
        C.parse({"fact": "names", "has": []}, "test")


# -- an explainer named like a fact prefix --------------------------------------------------

from diag.rules import registry as RG  # noqa: E402


@pytest.fixture
def shadow_explainer(monkeypatch):
    """An explainer whose name is also a fact prefix ('env.' = environment variables)."""
    def fn(ctx, **kw):
        return X.Values(values={"proxy_port": 3128})
    ex = X.Explainer("env", fn, provides=("proxy_port",))
    monkeypatch.setattr(X, "_EXPLAINERS", {**X.explainers(), "env": ex})
    return ex


def _rule(tmp_path, body: str):
    d = tmp_path / "env"
    d.mkdir(parents=True, exist_ok=True)
    p = d / "SGL-ENV-900-probe.toml"
    p.write_text(textwrap.dedent(body), encoding="utf-8")
    return tmp_path


def test_an_explainer_named_like_a_fact_prefix_keeps_the_facts_under_it(tmp_path, shadow_explainer):
    root = _rule(tmp_path, '''
        id = "SGL-ENV-900"
        slug = "probe"
        category = "env.http_proxy"
        title = "proxy {env.HTTP_PROXY} on port {env.proxy_port}"
        explainers = ["env"]
        [match]
        where = [{fact = "state", eq = "failed"}, {fact = "env.no_proxy", present = false}]
        ''')
    reg = RG.load(root, check_messages=False)
    rule = reg.rules[0]
    from diag.rules.engine import Context
    from diag.explain import Values

    class F:
        env = {"HTTP_PROXY": "http://p:3128"}
        state = "failed"
        values = {}
    ctx = Context(rule=rule, facts=F(), hits=[], values={"env": Values(values={"proxy_port": 3128})})
    assert ctx.lookup("env.proxy_port") == 3128               # the explainer's value
    assert ctx.lookup("env.HTTP_PROXY") == "http://p:3128"    # the fact under the same prefix
    assert ctx.render(rule.title) == "proxy http://p:3128 on port 3128"


def test_an_explainer_value_still_needs_the_explainer_declared(tmp_path, shadow_explainer):
    root = _rule(tmp_path, '''
        id = "SGL-ENV-900"
        slug = "probe"
        category = "env.http_proxy"
        title = "port {env.proxy_port}"
        [match]
        where = [{fact = "state", eq = "failed"}]
        ''')
    with pytest.raises(S.RuleError, match="without declaring it"):
        RG.load(root, check_messages=False)
    # a fact under the prefix needs no explainer
    root = _rule(tmp_path, '''
        id = "SGL-ENV-900"
        slug = "probe"
        category = "env.http_proxy"
        title = "proxy {env.HTTP_PROXY}"
        [match]
        where = [{fact = "state", eq = "failed"}]
        ''')
    assert RG.load(root, check_messages=False).rules[0].title == "proxy {env.HTTP_PROXY}"


def test_escaped_braces_render_literally_and_stray_ones_are_refused():
    from diag.rules import text as T
    got = T.render("docker inspect --format '{{{{.State.OOMKilled}}}}' [[{x} ]]done", lambda p: T.MISSING)
    assert got == "docker inspect --format '{{.State.OOMKilled}}' done"
    for bad in ("a } b", "a {x b", "[[ { ]]"):
        with pytest.raises(T.TemplateError, match="stray brace"):
            T.parse(bad)


def test_external_variables_may_be_lower_case_sglang_ones_may_not(tmp_path):
    body = '''
        id = "SGL-ENV-900"
        slug = "probe"
        category = "env.http_proxy"
        title = "proxy"
        [match]
        where = [{fact = "state", eq = "failed"}]
        [[fix]]
        option = "a"
        %s = "no_proxy"
        value = "localhost"
        '''
    assert RG.load(_rule(tmp_path, body % "external_env"), check_messages=False).rules[0].fixes[0].external_env == "no_proxy"
    with pytest.raises(S.RuleError, match="not an environment variable name"):
        RG.load(_rule(tmp_path, body % "env"), check_messages=False)


def test_every_fact_path_is_defined_once():
    """A dict literal keeps the last of two equal keys without a word: a fact defined twice reads one
    definition while its other text documents it."""
    import ast
    from pathlib import Path
    import diag.facts
    tree = ast.parse(Path(diag.facts.__file__).read_text())
    node = next(n for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign))
                and any(getattr(t, "id", None) == "FACT_PATHS" for t in ([n.target] if isinstance(n, ast.AnnAssign) else n.targets)))
    keys = [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
    assert len(keys) > 100 and len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)
