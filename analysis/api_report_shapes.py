"""What the report analyses' API accepts and answers: query parameters, the detector run's body, shapes.

Every list of event ids in an answer names events the viewer may read; the shapes document what the
recovery analytics, the checkpoint I/O path and the detections answer.
"""

from __future__ import annotations

from rest_framework import serializers

from config.api_input import big_integer, text
from timeline import api_params, api_shapes


class RecoveryQuery(api_params.WindowQuery):
    top = big_integer(
        required=False, default=3, min_value=1, max_value=50, help_text="how many of the most excluded"
    )
    align = text(max_length=10, help_text=api_params.ALIGN_HELP)


# ----------------------------------------------------------------------------- response shapes


class _EventIds(serializers.ListField):
    child = serializers.IntegerField()


class EntityExclusionsShape(serializers.Serializer):
    entity = serializers.CharField(
        allow_blank=True, help_text="node name, or its pseudonym under a redacting grant"
    )
    count = serializers.IntegerField()
    events = _EventIds()


class ExclusionsShape(serializers.Serializer):
    total = serializers.IntegerField()
    entities = serializers.IntegerField()
    top = serializers.IntegerField()
    top_entities = serializers.ListField(child=serializers.CharField())
    top_share = serializers.FloatField(allow_null=True, help_text="share of all exclusions, 0-1")
    top_events = _EventIds()
    per_entity = EntityExclusionsShape(many=True)


class ChainShape(serializers.Serializer):
    chain = serializers.CharField()
    attempts = serializers.IntegerField()
    outcome = serializers.CharField(allow_null=True)
    success = serializers.BooleanField(allow_null=True, help_text="null: the chain had not ended")
    intervals_s = serializers.ListField(child=serializers.FloatField())
    trigger_event = serializers.IntegerField(allow_null=True, help_text="the failure that started it")
    attempt_events = _EventIds(help_text="each attempt's creation, in attempt order")
    outcome_event = serializers.IntegerField(allow_null=True, help_text="null: the chain had not ended")
    events = _EventIds()


class RetriesShape(serializers.Serializer):
    chains = serializers.IntegerField()
    attempts = serializers.IntegerField()
    succeeded = serializers.IntegerField()
    success_rate = serializers.FloatField(allow_null=True, help_text="of the chains that ended")
    intervals = serializers.IntegerField(allow_null=True)
    median_s = serializers.FloatField(allow_null=True)
    q1_s = serializers.FloatField(allow_null=True)
    q3_s = serializers.FloatField(allow_null=True)
    chain_list = ChainShape(many=True)
    events = serializers.DictField(child=_EventIds())
    hidden = serializers.CharField(allow_null=True, help_text="why some figures are null")


class ManualShape(serializers.Serializer):
    count = serializers.IntegerField()
    succeeded = serializers.IntegerField(allow_null=True)
    success_rate = serializers.FloatField(allow_null=True)
    events = serializers.DictField(child=_EventIds())
    hidden = serializers.CharField(allow_null=True)


class SchedulerRecoveryShape(serializers.Serializer):
    org = serializers.CharField()
    exclusions = ExclusionsShape()
    retries = RetriesShape()
    manual = ManualShape()
    auto_vs_manual = serializers.FloatField(allow_null=True, help_text="auto-retry over manual success")


class RecoveryShape(api_shapes.WindowShape):
    schedulers = SchedulerRecoveryShape(many=True)
    truncated = serializers.BooleanField()
    events = serializers.DictField(
        child=serializers.DictField(), help_text="event id → the event as presented to you"
    )


class WriteShape(serializers.Serializer):
    entity = serializers.CharField(allow_blank=True)
    org = serializers.CharField()
    start = serializers.CharField()
    end = serializers.CharField()
    duration_s = serializers.FloatField()
    size_bytes = serializers.FloatField(allow_null=True)
    write_fraction = serializers.FloatField(allow_null=True, help_text="size / duration / link capacity")
    link_fraction = serializers.FloatField(allow_null=True, help_text="mean link transmit / capacity")
    link_peak_fraction = serializers.FloatField(allow_null=True)
    slot_full_share = serializers.FloatField(allow_null=True, help_text="share of the write at a full table")
    slots_max = serializers.FloatField(allow_null=True)
    slot_table = serializers.FloatField(allow_null=True)
    backlog_mean = serializers.FloatField(allow_null=True)
    attribution = serializers.ChoiceField(["rpc_slot_bound", "link_bound", "unattributed", "unknown"])
    explanation = serializers.CharField()
    events = _EventIds()


class _Range(serializers.ListField):
    child = serializers.FloatField()


class CheckpointShape(serializers.Serializer):
    start = serializers.CharField()
    end = serializers.CharField()
    step = serializers.JSONField(allow_null=True)
    entities = serializers.IntegerField()
    duration_s = serializers.FloatField()
    size_bytes = serializers.FloatField(allow_null=True)
    write_fraction = _Range(allow_null=True, help_text="[min, max] over the writes")
    link_fraction = _Range(allow_null=True)
    link_fraction_median = serializers.FloatField(allow_null=True)
    fleet_slot_full_share = serializers.FloatField(
        allow_null=True, help_text="share of the fleet's (node, 15 s) cells at a full slot table, 0-1"
    )
    fleet_slots_mean = serializers.FloatField(allow_null=True, help_text="RPC slots in use, fleet mean")
    fleet_slot_table = serializers.FloatField(help_text="slots in a full table")
    fleet_link_fraction = _Range(
        allow_null=True, help_text="[median, max] over the fleet's nodes of their mean link use, 0-1"
    )
    attribution = serializers.CharField()
    attributions = serializers.DictField(child=serializers.IntegerField())
    writes = WriteShape(many=True)


class CheckpointSummaryShape(serializers.Serializer):
    checkpoints = serializers.IntegerField()
    writes = serializers.IntegerField()
    write_fraction = _Range(allow_null=True)
    link_fraction = _Range(allow_null=True)
    link_fraction_median = serializers.FloatField(allow_null=True)
    fleet_link_fraction = _Range(allow_null=True, help_text="[lowest median, highest max] of the checkpoints")
    attributions = serializers.DictField(child=serializers.IntegerField(), help_text="writes per verdict")
    checkpoint_attributions = serializers.DictField(
        child=serializers.IntegerField(), help_text="checkpoints per verdict (each row's attribution)"
    )
    hidden = serializers.CharField(allow_null=True, help_text="why per-write figures are missing")


class CheckpointPathShape(api_shapes.WindowShape):
    checkpoints = CheckpointShape(many=True)
    summary = CheckpointSummaryShape()


class CheckpointQuery(api_params.WindowQuery):
    align = text(max_length=10, help_text=api_params.ALIGN_HELP)


class DetectionsQuery(api_params.WindowQuery):
    align = text(max_length=10, help_text=api_params.ALIGN_HELP)


class DetectionRunBody(serializers.Serializer):
    write = serializers.BooleanField(required=False, default=True, help_text="store them as your events")

    def get_fields(self):
        fields = super().get_fields()
        fields["from"] = text(max_length=64, help_text=api_params.TIME_HELP)
        fields["to"] = text(max_length=64, help_text=f"{api_params.TIME_HELP}; default: now")
        return fields


class DetectionSignalShape(serializers.Serializer):
    family = serializers.CharField()
    series = serializers.CharField(help_text="org/metric{other labels} or org/event name")
    layer = serializers.ChoiceField(["peer+self", "cusum", "gap", "event"])
    score = serializers.FloatField()


class DetectionShape(serializers.Serializer):
    ts = serializers.CharField()
    entity = serializers.CharField(allow_blank=True)
    score = serializers.FloatField()
    families = serializers.ListField(child=serializers.CharField())
    signals = DetectionSignalShape(many=True)


class DetectionRunShape(api_shapes.WindowShape):
    written = serializers.IntegerField(help_text="detections stored that were not yet")
    detections = DetectionShape(many=True)


class StoredDetectionsShape(api_shapes.WindowShape):
    events = api_shapes.EventShape(many=True)
