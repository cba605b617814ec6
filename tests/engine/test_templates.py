"""Route ``with`` templates: which expressions exist, and what rendering does with them."""

from __future__ import annotations

import pytest

from ssegate.config.errors import ConfigError
from ssegate.contract.identity import CredentialsRejected, Identity
from ssegate.engine.templates import MissingTemplateValue, Template

PATH = "bindings.north_sse_kafka_mapping.routes[0].with.topic"


def test_params_are_substituted_and_literal_text_is_kept() -> None:
    template = Template.compile("events-${params.topic}.v1", PATH)
    assert template.render({"topic": "orders"}) == "events-orders.v1"
    assert not template.is_static
    assert template.param_names == {"topic"}


def test_text_without_expressions_is_static() -> None:
    template = Template.compile("orders $5 {x}", PATH)
    assert template.is_static
    assert template.render({}) == "orders $5 {x}"


def test_guarded_identity_and_attributes_are_substituted() -> None:
    template = Template.compile(
        "${guarded['authn_jwt'].identity}/${guarded[\"authn_jwt\"].attributes.tenant}", PATH
    )
    user = Identity("alice", attributes={"tenant": "acme"})
    assert template.render({}, {"authn_jwt": user}) == "alice/acme"
    assert template.guard_names == {"authn_jwt"}


def test_credentials_the_guard_rejected_give_no_identity_to_render() -> None:
    template = Template.compile("${guarded['g'].identity}", PATH)
    with pytest.raises(MissingTemplateValue, match="guard 'g' has no identity"):
        template.render({}, {"g": CredentialsRejected("token has expired")})


@pytest.mark.parametrize(
    "text",
    [
        "${etag}",
        "${params}",
        "${params.}",
        "${guarded.g.identity}",
        "${guarded['g'].roles}",
        "${env.HOME}",
        "x-${params.a b}",
        "${params.a.b}",
    ],
)
def test_unknown_expressions_are_config_errors_at_compile_time(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Template.compile(text, PATH)
    assert caught.value.path == PATH
    assert "unknown expression" in caught.value.message


def test_an_unclosed_expression_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as caught:
        Template.compile("a${params.x", PATH)
    assert caught.value.message == "'${' without a closing '}' in 'a${params.x'"


def test_a_missing_param_at_render_names_the_expression() -> None:
    template = Template.compile("${params.topic}", PATH)
    with pytest.raises(MissingTemplateValue) as caught:
        template.render({"other": "x"})
    assert caught.value.expression == "params.topic"
    assert str(caught.value) == "${params.topic}: no parameter 'topic'"
    assert isinstance(caught.value, KeyError)


def test_a_missing_guard_identity_or_attribute_at_render_is_reported() -> None:
    identity = Template.compile("${guarded['g'].identity}", PATH)
    with pytest.raises(MissingTemplateValue, match="guard 'g' has no identity"):
        identity.render({})
    with pytest.raises(MissingTemplateValue, match="guard 'g' has no identity"):
        identity.render({}, {"other": Identity("x")})
    attribute = Template.compile("${guarded['g'].attributes.tenant}", PATH)
    with pytest.raises(MissingTemplateValue, match="no attribute 'tenant'"):
        attribute.render({}, {"g": Identity("x")})
