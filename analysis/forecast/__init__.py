"""Scale forecast: how a job's demand on each resource with a capacity grows with its node count, and
at what size it saturates — from the runs already observed (the 2- and 4-node validations of a job
that is about to run on 60).

A *run* is one session of the job: the scheduler's ``session`` spans of one session id, one per node
(their node labels are the run's nodes, their extent its time). A *phase* of a run is an interval named
by the rules (``forecast_rules.json``, a ``forecast`` section of the analyses file may replace it):
``session_start``/``session_end`` or the first event of a name inside the run (``init_done``), or the
pairs of begin/end events a run logs several times (``checkpoint_begin``/``checkpoint_end``).

A *resource* is a metric paired with a capacity metric by the lane rules' ``capacity_pairs`` (data, not
names in code). A resource whose series name no entity (the array's totals) is *shared*: its load is the
sum of its series. One whose series are per entity (each node's RPC slot table) is *per node*: the
fleet's total is fitted and the demand of one of the job's nodes compared with one node's capacity.

For each resource and phase, the points are the bucket means inside each observed phase (the upper half
of them: a phase's demand is what it asks at its height, not while its first containers start) at the
run's node count, and the buckets outside every run of the job at 0 nodes (the background). On them:

* ``load = background + k x nodes`` by least squares, standard errors from the residuals; with runs of a
  single size the slope's variance is that of one observation per run, not of its buckets (the size
  effect was seen once), and the forecast says so;
* the Universal Scalability Law ``X(N) = l*N / (1 + s*(N-1) + k*N*(N-1))`` (plus the background) when
  runs of three sizes or more exist, by Levenberg-Marquardt, with the covariance of its coefficients.

Intervals are 95 % (Student's t on the residual degrees of freedom). The demand at the target size, the
node count at which the demand reaches the capacity (with the sizes at which the interval's edges reach
it) and the first resource to saturate are reported. A resource whose slope is not above zero beyond
its interval, or that does not saturate below ``max_nodes``, has "no scale limit".

Invariants: spans, events and series are read through the viewer's scope; a series the viewer may read
only in aggregate is read as part of a fleet aggregate of at least ``MIN_AGGREGATE_GROUP`` series (the
store refuses smaller groups) and the forecast is made from that aggregate; a resource whose load the
viewer may not read is absent (it is not estimated); a phase never observed gets no forecast.

The package: :mod:`.rules` (what runs and phases are called), :mod:`.runs` (reading them),
:mod:`.resources` (what has a capacity the viewer may read), :mod:`.fits` (the models) and
:mod:`.scale` (the forecast and its verdict).
"""

from analysis.forecast.fits import LinearFit, UslFit, crossing, fit_linear, fit_usl, t975, usl
from analysis.forecast.resources import Resource, not_shared, readable_resources
from analysis.forecast.rules import ForecastConfig
from analysis.forecast.runs import Run, phase_intervals, read_jobs, read_runs
from analysis.forecast.scale import NO_SCALE_LIMIT, resource_forecast, scale_forecast

__all__ = [
    "NO_SCALE_LIMIT",
    "ForecastConfig",
    "LinearFit",
    "Resource",
    "Run",
    "UslFit",
    "crossing",
    "fit_linear",
    "fit_usl",
    "not_shared",
    "phase_intervals",
    "read_jobs",
    "read_runs",
    "readable_resources",
    "resource_forecast",
    "scale_forecast",
    "t975",
    "usl",
]
