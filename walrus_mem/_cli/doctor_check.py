"""One finding of ``walrus-mem doctor``, shared by its checks (doctor.py, doctor_network.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Check", "Status"]

Status = Literal["ok", "warn", "fail"]


@dataclass(frozen=True)
class Check:
    """One finding. ``fix`` says what to do when ``status`` is not ``ok``."""

    name: str
    status: Status
    detail: str
    fix: str = ""

    @property
    def ok(self) -> bool:
        """True unless the check failed (warnings do not fail ``doctor``)."""
        return self.status != "fail"

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "detail": self.detail, "fix": self.fix}
