"""The clock corrections' API and page, by their former module path: the views live in
:mod:`timeline.clock.api`."""

from timeline.clock.api import ClockCorrectionView, ClockEstimateView, ClockOrderingView, ClockPage

__all__ = ["ClockCorrectionView", "ClockEstimateView", "ClockOrderingView", "ClockPage"]
