"""Time zones for the wall-clock triggers (shared by ``cron`` and ``date``)."""

from __future__ import annotations

from datetime import timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def resolve_zone(tz: str | tzinfo | None) -> tzinfo:
    """A `tzinfo` from an IANA name (``"Europe/Berlin"``), a tzinfo, or None (UTC)."""
    if tz is None:
        return timezone.utc
    if isinstance(tz, tzinfo):
        return tz
    if not isinstance(tz, str) or not tz:
        raise ValueError(f"tz must be an IANA time zone name such as 'Europe/Berlin', got {tz!r}")
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(
            f"unknown time zone {tz!r}: use an IANA name such as 'Europe/Berlin' "
            "(on systems without tz data, install the 'tzdata' package)"
        ) from exc
