"""Flags of releases older than the catalog (diag/flags.py LEGACY_FLAGS) and the catalog a log of
those releases is checked against."""
from __future__ import annotations

from diag.flags import catalog_versions, for_version
from diag.versions import VersionRange


def test_a_range_before_the_catalog_is_checked_against_its_oldest_release():
    cat = for_version(VersionRange(low="0.1.24", high="0.2.6"))
    assert cat.versions == [catalog_versions()[0]]
    assert cat.legacy("--disable-flashinfer") and cat.legacy("--disable-flashinfer-sampling")


def test_legacy_flags_follow_the_versions_that_accept_them():
    assert for_version("0.3.5.post2").legacy("--disable-flashinfer")
    assert not for_version("0.3.6").legacy("--disable-flashinfer")
    assert not for_version("0.1.20").legacy("--disable-flashinfer-sampling")      # before FlashInfer's sampling kernels
    assert not for_version(VersionRange(low="0.4.3.post3", high="0.5.6.post2")).legacy("--disable-flashinfer")
    assert for_version(None).legacy("--disable-flashinfer")                        # an unknown version can be any
    assert not for_version("0.5.12").legacy("--attention-backend")                 # only the listed flags


def test_a_range_after_the_catalog_is_checked_against_its_newest_release():
    cat = for_version(VersionRange(low="9.0.0"))
    assert cat.versions == [catalog_versions()[-1]]
