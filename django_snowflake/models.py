from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _


class WorkerNode(models.Model):
    """One worker slot of the ID space, leased to one process at a time.

    The lease protocol (docs: "Worker IDs") keeps two holders of a slot from ever issuing the
    same time: ``last_timestamp`` is a reservation written before the holder may issue up to
    it, and a new holder starts above it.
    """

    class NodeType(models.TextChoices):
        ACTUAL = "actual", _("actual machine")
        CONTAINER = "container", _("container")

    worker_id = models.IntegerField(_("worker ID"))
    datacenter_id = models.IntegerField(_("datacenter ID"), default=0)
    host_name = models.CharField(_("host name"), max_length=255)
    process_id = models.IntegerField(_("process ID"))
    label = models.CharField(_("label"), max_length=100, blank=True)
    node_type = models.CharField(
        _("node type"), max_length=10, choices=NodeType.choices, default=NodeType.ACTUAL
    )
    launched_at = models.DateTimeField(_("launched at"))
    heartbeat_at = models.DateTimeField(_("heartbeat at"))
    lease_expires_at = models.DateTimeField(_("lease expires at"))
    released_at = models.DateTimeField(_("released at"), null=True, blank=True)
    last_timestamp = models.BigIntegerField(
        _("high-water time"), help_text=_("In layout time units since the epoch.")
    )
    clock_sequence = models.IntegerField(_("clock sequence"), default=0)
    layout = models.CharField(_("layout fingerprint"), max_length=100)
    token = models.CharField(_("owner token"), max_length=32)

    class Meta:
        verbose_name = _("worker node")
        verbose_name_plural = _("worker nodes")
        ordering = ["datacenter_id", "worker_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["worker_id", "datacenter_id"], name="django_snowflake_unique_slot"
            )
        ]

    def __str__(self) -> str:
        return f"worker {self.worker_id}/{self.datacenter_id} on {self.host_name}:{self.process_id}"
