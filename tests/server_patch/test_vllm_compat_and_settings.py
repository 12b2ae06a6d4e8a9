"""The vLLM version table, the signature check, and the environment settings."""

from __future__ import annotations

import pytest

from server_patch import settings, vllm_compat
from server_patch.c128a import builder
from server_patch.settings import Settings, SettingsError


@pytest.mark.parametrize(
    ("version", "variant"),
    [
        ("0.26.0", "capacity"),
        ("0.27.0", "packed"),
        ("0.27.1", "packed"),
        ("0.27.2rc1.dev110+gacb0f1dcd", "packed"),  # the #52448 reporter's nightly
        ("0.28.0", "capacity"),
        ("0.29.0", "prefix"),
        ("0.30.0", "prefix"),
        ("0.33.0", "prefix"),
        ("0.33.4", "prefix"),
        ("0.34.0", "prefix"),  # the same sparse_mla.py as 0.31.0 - 0.33.0
        ("0.34.2", "prefix"),
        ("0.25.1", "unknown"),
        ("0.35.0", "unknown"),
        ("not-a-version", "unknown"),
        (None, "unknown"),
    ],
)
def test_upstream_variant_per_release(version, variant):
    assert vllm_compat.upstream_variant(version) == variant


@pytest.mark.parametrize(
    ("version", "supported"),
    [
        ("0.26.0", True),
        ("0.27.1", True),
        ("0.27.2rc1.dev110+gacb0f1dcd", True),
        ("0.33.0", True),
        ("0.33.9", True),
        ("0.34.0", True),
        ("0.34.3", True),
        ("0.25.1", False),
        ("0.26.0rc1", False),
        ("0.35.0", False),
        ("0.35.0rc1", False),
        ("garbage", False),
        (None, False),
    ],
)
def test_default_supported_range_is_0_26_to_0_34_x(version, supported):
    assert vllm_compat.is_supported(version) is supported


def test_supported_range_can_be_overridden():
    assert vllm_compat.is_supported("0.35.1", ">=0.26,<0.36")
    assert not vllm_compat.is_supported("0.28.0", "==0.27.1")
    with pytest.raises(ValueError, match="PEP 440"):
        vllm_compat.parse_specifier("0.28 or newer")


def _upstream_like(positions, compress_ratio, num_decode_tokens, token_to_req_indices,
                   block_table, block_size, slot_mapping, global_decode_buffer,
                   decode_lens_buffer, prefill_buffer, max_compressed_tokens: int = 8192):
    return None


def _dcp_fork(positions, compress_ratio, num_decode_tokens, actual_num_query_tokens,
              token_to_req_indices, block_table, block_size, slot_mapping,
              global_decode_buffer, decode_lens_buffer, prefill_buffer,
              max_compressed_tokens=8192, dcp_world_size=1):
    return None


def _other_default(positions, compress_ratio, num_decode_tokens, token_to_req_indices,
                   block_table, block_size, slot_mapping, global_decode_buffer,
                   decode_lens_buffer, prefill_buffer, max_compressed_tokens: int = 4096):
    return None


def _keyword_only(positions, compress_ratio, num_decode_tokens, token_to_req_indices,
                  block_table, block_size, slot_mapping, global_decode_buffer,
                  decode_lens_buffer, prefill_buffer, *, max_compressed_tokens: int = 8192):
    return None


def test_signature_check_accepts_upstream_and_ours():
    assert vllm_compat.signature_problem(_upstream_like) is None
    for layout in ("capacity", "prefix", "packed"):
        assert vllm_compat.signature_problem(builder(layout)) is None


@pytest.mark.parametrize(
    ("fn", "reason"),
    [
        (None, "does not exist"),
        (42, "not callable"),
        (_dcp_fork, "expected"),
        (_other_default, "defaults to 4096"),
        (_keyword_only, "keyword"),
        (lambda *args, **kwargs: None, "expected"),
    ],
)
def test_signature_check_names_what_is_wrong(fn, reason):
    problem = vllm_compat.signature_problem(fn)
    assert problem is not None and reason in problem


def test_settings_defaults():
    s = Settings.from_env({})
    assert s == Settings(layout="capacity", strict=True, receipt_dir=None,
                         supported_vllm=vllm_compat.DEFAULT_SUPPORTED)
    assert (s.guard, s.guard_flush_s) == ("1", 5.0)  # the guard counts unless told not to


@pytest.mark.parametrize(
    ("value", "mode"),
    [("0", "0"), ("off", "0"), ("1", "1"), ("", "1"), ("on", "1"), ("strict", "strict"),
     ("STRICT", "strict")],
)
def test_settings_read_the_guard_mode(value, mode):
    assert Settings.from_env({settings.ENV_GUARD: value}).guard == mode


def test_settings_read_the_guard_flush_interval():
    assert Settings.from_env({settings.ENV_GUARD_FLUSH_S: "0.25"}).guard_flush_s == 0.25
    assert Settings.from_env({settings.ENV_GUARD_FLUSH_S: " "}).guard_flush_s == 5.0


def test_settings_read_every_variable():
    s = Settings.from_env({
        settings.ENV_LAYOUT: " Prefix ",
        settings.ENV_STRICT: "0",
        settings.ENV_RECEIPT_DIR: "/r",
        settings.ENV_SUPPORTED_VLLM: "==0.27.1",
    })
    assert (s.layout, s.strict, s.receipt_dir, s.supported_vllm) == ("prefix", False, "/r",
                                                                     "==0.27.1")
    assert Settings.from_env({settings.ENV_LAYOUT: "off"}).layout == "off"
    for value in ("false", "no", "OFF"):
        assert Settings.from_env({settings.ENV_STRICT: value}).strict is False
    for value in ("", "1", "true", "yes"):
        assert Settings.from_env({settings.ENV_STRICT: value}).strict is True


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({settings.ENV_LAYOUT: "packd"}, "DSV4_QUAL_C128A_LAYOUT"),
        ({settings.ENV_STRICT: "maybe"}, "DSV4_QUAL_STRICT"),
        ({settings.ENV_SUPPORTED_VLLM: "0.28 or newer"}, "DSV4_QUAL_SUPPORTED_VLLM"),
        ({settings.ENV_GUARD: "strictt"}, "DSV4_QUAL_GUARD"),
        ({settings.ENV_GUARD_FLUSH_S: "soon"}, "DSV4_QUAL_GUARD_FLUSH_S"),
        ({settings.ENV_GUARD_FLUSH_S: "-1"}, "DSV4_QUAL_GUARD_FLUSH_S"),
        ({settings.ENV_GUARD_FLUSH_S: "inf"}, "DSV4_QUAL_GUARD_FLUSH_S"),
    ],
)
def test_settings_refuse_unreadable_values(environ, message):
    with pytest.raises(SettingsError, match=message):
        Settings.from_env(environ)


def test_strictness_is_known_even_when_other_settings_are_broken():
    assert settings.strict_from_env({settings.ENV_LAYOUT: "bogus"}) is True
    assert settings.strict_from_env({settings.ENV_STRICT: "0"}) is False
    assert settings.strict_from_env({settings.ENV_STRICT: "maybe"}) is True
