"""Label and field selectors select what kubectl's `-l` and `--field-selector` select on a real cluster."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tenantgpu.apiserver.selectors import (
    FieldSelector,
    SelectorError,
    check_field_selector,
    exact_name,
    field_requirements,
    field_selector_exact_match,
    match_selector_object,
    parse_field_selector,
    parse_label_selector,
)

WEB = {"app": "web", "tier": "frontend", "env": "prod"}
DB = {"app": "db", "tier": "backend"}
BARE: dict[str, str] = {}


@pytest.mark.parametrize(
    ("selector", "web", "db", "bare"),
    [
        ("", True, True, True),
        ("app=web", True, False, False),
        ("app==web", True, False, False),
        ("app!=web", False, True, True),
        ("app in (web,db)", True, True, False),
        ("app in (db)", False, True, False),
        ("app notin (db)", True, False, True),
        ("env", True, False, False),
        ("!env", False, True, True),
        ("app=web,tier=frontend", True, False, False),
        ("app=web,tier=backend", False, False, False),
        ("  app = web , env ", True, False, False),
        ("tier in (backend, frontend),!env", False, True, False),
        ("example.com/team=gpu", False, False, False),
    ],
)
def test_label_selector_matches_like_kube(selector: str, web: bool, db: bool, bare: bool) -> None:
    sel = parse_label_selector(selector)
    assert (sel.matches(WEB), sel.matches(DB), sel.matches(BARE)) == (web, db, bare)


def test_empty_value_selects_label_with_empty_value_only() -> None:
    sel = parse_label_selector("role=")
    assert sel.matches({"role": ""})
    assert not sel.matches({})
    assert not sel.matches({"role": "x"})


def test_gt_lt_compare_integers() -> None:
    sel = parse_label_selector("gpus>2")
    assert sel.matches({"gpus": "4"})
    assert not sel.matches({"gpus": "2"})
    assert not sel.matches({"gpus": "many"})
    assert parse_label_selector("gpus<2").matches({"gpus": "1"})


@pytest.mark.parametrize(
    ("selector", "fragment"),
    [
        ("app=web,", "identifier after ','"),
        ("app in web", "expected: '('"),
        ("app in (web", "expected: ')'"),
        ("app ~ web", "unable to parse requirement"),
        ("-bad-=x", "unable to parse requirement: key: Invalid value"),
        ("app=-bad-", "unable to parse requirement: values[0][app]"),
        ("!app=web", "expected: ',' or 'end of string'"),
        ("app=web x", "expected: ',' or 'end of string'"),
        ("gpus>two", "must be an integer"),
        (",app", "expected: !, identifier"),
    ],
)
def test_bad_label_selectors_are_rejected_in_kube_words(selector: str, fragment: str) -> None:
    with pytest.raises(SelectorError) as caught:
        parse_label_selector(selector)
    assert fragment in caught.value.message


def test_printed_form_is_canonical_and_sorted() -> None:
    sel = parse_label_selector("zone in (b,a), app=web, !legacy")
    assert str(sel) == "app=web,!legacy,zone in (a,b)"


# `in` and `notin` are the lexer's keywords, never a key: kube's parser refuses `in` as a selector too.
_name = st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True).filter(lambda n: n not in ("in", "notin"))
_value = st.from_regex(r"([a-z0-9]([a-z0-9.\-_]{0,5}[a-z0-9])?)?", fullmatch=True)
_term = st.one_of(
    st.tuples(_name, st.sampled_from(["=", "==", "!="]), _value).map(lambda t: f"{t[0]}{t[1]}{t[2]}"),
    st.tuples(_name, st.sampled_from(["in", "notin"]), st.lists(_value, min_size=1, max_size=3)).map(
        lambda t: f"{t[0]} {t[1]} ({','.join(t[2])})"
    ),
    _name,
    _name.map(lambda n: "!" + n),
)


@given(st.lists(_term, max_size=4), st.dictionaries(_name, _value, max_size=4))
def test_printed_selector_parses_back_to_the_same_meaning(terms: list[str], labels: dict[str, str]) -> None:
    sel = parse_label_selector(",".join(terms))
    again = parse_label_selector(str(sel))
    assert again == sel
    assert again.matches(labels) == sel.matches(labels)


def test_match_selector_object_with_labels_and_expressions() -> None:
    selector = {
        "matchLabels": {"app": "web"},
        "matchExpressions": [
            {"key": "env", "operator": "In", "values": ["prod", "stage"]},
            {"key": "legacy", "operator": "DoesNotExist"},
        ],
    }
    assert match_selector_object(selector, WEB)
    assert not match_selector_object(selector, {**WEB, "legacy": "1"})
    assert not match_selector_object(selector, {**WEB, "env": "dev"})
    assert not match_selector_object(selector, DB)
    notin = {"matchExpressions": [{"key": "hami.io/webhook", "operator": "NotIn", "values": ["ignore"]}]}
    assert match_selector_object(notin, {})
    assert not match_selector_object(notin, {"hami.io/webhook": "ignore"})
    assert match_selector_object({"matchExpressions": [{"key": "app", "operator": "Exists"}]}, DB)


def test_empty_or_missing_selector_object_selects_everything() -> None:
    assert match_selector_object(None, WEB)
    assert match_selector_object({}, {})


def test_selector_object_with_bad_operator_or_values_is_an_error() -> None:
    with pytest.raises(SelectorError, match="not a valid selector operator"):
        match_selector_object({"matchExpressions": [{"key": "a", "operator": "Near"}]}, {})
    with pytest.raises(SelectorError, match="Required value"):
        match_selector_object({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, {})
    with pytest.raises(SelectorError, match="Forbidden"):
        match_selector_object({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}, {})


POD_BOUND = {
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"nodeName": "worker-1", "schedulerName": "hami-scheduler"},
    "status": {"phase": "Running"},
}
POD_PENDING = {"metadata": {"name": "job", "namespace": "team-a"}, "spec": {}, "status": {"phase": "Pending"}}
EVENT = {
    "metadata": {"name": "web.1", "namespace": "default"},
    "involvedObject": {"kind": "Pod", "name": "web", "namespace": "default", "uid": "u-1"},
    "type": "Warning",
    "reason": "FailedScheduling",
}


def test_field_selector_on_dotted_paths() -> None:
    assert parse_field_selector("metadata.name=web").matches(POD_BOUND)
    assert not parse_field_selector("metadata.name=web").matches(POD_PENDING)
    assert parse_field_selector("status.phase!=Running").matches(POD_PENDING)
    assert parse_field_selector("spec.schedulerName==hami-scheduler").matches(POD_BOUND)


def test_unbound_pods_are_selected_by_empty_node_name() -> None:
    unbound = parse_field_selector("spec.nodeName=")
    assert unbound.matches(POD_PENDING)
    assert not unbound.matches(POD_BOUND)
    assert parse_field_selector("spec.nodeName!=").matches(POD_BOUND)


def test_describe_event_selector_in_any_term_order() -> None:
    kubectl_127 = "involvedObject.name=web,involvedObject.namespace=default,involvedObject.uid=u-1"
    kubectl_133 = "involvedObject.uid=u-1,involvedObject.name=web,involvedObject.namespace=default"
    for text in (kubectl_127, kubectl_133):
        sel = parse_field_selector(text)
        assert sel.matches(EVENT)
        assert not sel.matches({**EVENT, "involvedObject": {**EVENT["involvedObject"], "uid": "u-2"}})
    assert parse_field_selector("type=Warning,reason=FailedScheduling").matches(EVENT)
    assert len(parse_field_selector(kubectl_133).requirements) == 3


def test_field_selector_escapes() -> None:
    sel = parse_field_selector(r"metadata.name=a\,b\=c")
    assert sel.requirements == [("metadata.name", "=", "a,b=c")]
    assert sel.matches({"metadata": {"name": "a,b=c"}})
    assert parse_field_selector(str(sel)) == sel


@pytest.mark.parametrize("text", ["metadata.name", "=x", "metadata.name=a=b", r"metadata.name=a\x"])
def test_bad_field_selectors_are_rejected(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_field_selector(text)


def test_exact_match_gives_the_pinned_value_for_indexing() -> None:
    sel = parse_field_selector("spec.nodeName=worker-1,status.phase!=Succeeded")
    assert field_selector_exact_match(sel, "spec.nodeName") == "worker-1"
    assert field_selector_exact_match(sel, "status.phase") is None
    assert field_selector_exact_match(sel, "metadata.name") is None
    assert field_selector_exact_match(parse_field_selector("spec.nodeName="), "spec.nodeName") == ""
    assert field_selector_exact_match(None, "spec.nodeName") is None


def test_missing_booleans_read_false_like_kubes_field_sets() -> None:
    schedulable = {"metadata": {"name": "w1"}, "spec": {}}
    cordoned = {"metadata": {"name": "w2"}, "spec": {"unschedulable": True}}
    assert parse_field_selector("spec.unschedulable=false").matches(schedulable)
    assert not parse_field_selector("spec.unschedulable=false").matches(cordoned)
    assert parse_field_selector("spec.unschedulable=true").matches(cordoned)


def test_only_indexed_field_labels_are_accepted() -> None:
    check_field_selector("Pod", parse_field_selector("spec.nodeName=w1,status.phase!=Failed"))
    check_field_selector("Event", parse_field_selector("involvedObject.uid=u,type=Warning"))
    check_field_selector("ConfigMap", parse_field_selector("metadata.name=c"))
    with pytest.raises(SelectorError, match=r"field label not supported: spec\.foo"):
        check_field_selector("Pod", parse_field_selector("spec.foo=x"))
    with pytest.raises(SelectorError, match=r"field label not supported: spec\.nodeName"):
        check_field_selector("ConfigMap", parse_field_selector("spec.nodeName=x"))


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["metadata.name", "spec.nodeName", "status.phase"]),
            st.sampled_from(["=", "==", "!="]),
            st.text(alphabet="ab,=\\ -", max_size=5),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_printed_field_selector_parses_back(requirements: list[tuple[str, str, str]]) -> None:
    selector = FieldSelector(list(requirements))
    assert parse_field_selector(str(selector)) == selector


@pytest.mark.parametrize(
    ("text", "requirements"),
    [
        ("spec.nodeName=w1", (("spec.nodeName", "=", "w1"),)),
        # `==` is `=` to an authorizer; terms come sorted
        (
            "spec.nodeName==w1,metadata.name=web",
            (("metadata.name", "=", "web"), ("spec.nodeName", "=", "w1")),
        ),
        ("spec.nodeName!=w1", (("spec.nodeName", "!=", "w1"),)),
        ("spec.nodeName=a\\,b", (("spec.nodeName", "=", "a,b"),)),
        # kube does not trim the field: this one names no field a node authorizer knows
        ("spec.nodeName =w1", (("spec.nodeName ", "=", "w1"),)),
        (",spec.nodeName=w1,", (("spec.nodeName", "=", "w1"),)),
        # what does not parse hands authorizers nothing
        ("spec.nodeName", ()),
        ("spec.nodeName=w1,bad", ()),
        ("spec.nodeName=a=b", ()),
        ("", ()),
    ],
)
def test_authorizers_see_a_field_selector_as_kube_parses_it(
    text: str, requirements: tuple[tuple[str, str, str], ...]
) -> None:
    assert field_requirements(text) == requirements


def test_a_list_by_metadata_name_names_one_object() -> None:
    assert exact_name(field_requirements("metadata.name=db,type=Opaque")) == "db"
    assert exact_name(field_requirements("metadata.name!=db")) == ""
    assert exact_name(field_requirements("metadata.name=a/b")) == ""
    assert exact_name(field_requirements("metadata.name=..")) == ""
