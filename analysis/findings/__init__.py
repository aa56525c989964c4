"""The findings of an investigation, by kind: each module turns what one analysis found into findings.

:mod:`.finding` is the record and how much each kind weighs; :mod:`.causes` holds ``root_cause`` and
``saturation``, :mod:`.leads` ``onsets``, ``outliers``, ``new_templates`` and ``detections``,
:mod:`.forecasts` ``scale_forecast``. :func:`analysis.investigation.investigate` gathers them.
"""
