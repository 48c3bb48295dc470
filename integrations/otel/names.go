package otel

import "go.opentelemetry.io/otel/attribute"

// The names of the spans, their events and their attributes: the one place they are
// written, each documented in the package comment. The names of the metrics, and their
// attributes, are monitormetrics' (see the package comment, "Metrics"). The attributes follow
// OpenTelemetry's rules for names of one's own (a namespace, "itemops.", dots between
// the parts, snake_case within them), and error.type is OpenTelemetry's own attribute.

// scopeName is the instrumentation scope of the spans, the name the tracer is got by.
const scopeName = "github.com/itemops/itemops/integrations/otel"

// The names of the spans.
const (
	spanPass     = "itemops.pass"
	spanRun      = "itemops.run"
	spanProgress = "itemops.progress"
	spanCancel   = "itemops.cancel"
	spanFinalize = "itemops.finalize"
)

// The names of the events of a run's span.
const (
	eventPhaseChange     = "itemops.phase_change"
	eventCancelRequested = "itemops.cancel_requested"
)

// The keys of the attributes.
const (
	// Of a run, on the spans of a run and a finalizer call.
	keyRunKind = attribute.Key("itemops.run.kind")
	keyRunName = attribute.Key("itemops.run.name")
	keyRunUID  = attribute.Key("itemops.run.uid")
	// Of a run's span.
	keyRunStep      = attribute.Key("itemops.run.step") // "poll" or "finalize"
	keyRunPhase     = attribute.Key("itemops.run.phase")
	keyRunSkipped   = attribute.Key("itemops.run.skipped")
	keyRunGone      = attribute.Key("itemops.run.gone")
	keyRunRunning   = attribute.Key("itemops.run.operations.running")
	keyRunCompleted = attribute.Key("itemops.run.operations.completed")
	keyRunFailed    = attribute.Key("itemops.run.operations.failed")
	keyRunDeferred  = attribute.Key("itemops.run.operations.deferred")
	// Of the events of a run's span.
	keyPhaseFrom    = attribute.Key("itemops.phase.from")
	keyPhaseTo      = attribute.Key("itemops.phase.to")
	keyCancelReason = attribute.Key("itemops.cancel.reason")
	// Of a plugin call's span.
	keyPlugin      = attribute.Key("itemops.plugin")
	keyOperationID = attribute.Key("itemops.operation.id")
	keyCallWait    = attribute.Key("itemops.call.wait")    // seconds, a float
	keyCallAttempt = attribute.Key("itemops.call.attempt") // 0 for a first try
	keyCallOutcome = attribute.Key("itemops.call.outcome")
	keyCallCause   = attribute.Key("itemops.call.cause") // of a Cancel call
	// Of a pass's span.
	keyPassRuns       = attribute.Key("itemops.pass.runs")
	keyPassOperations = attribute.Key("itemops.pass.operations")
	keyPassCompleted  = attribute.Key("itemops.pass.completed")
	keyPassFailed     = attribute.Key("itemops.pass.failed")
	keyPassFinalized  = attribute.Key("itemops.pass.finalized")
	keyPassSkipped    = attribute.Key("itemops.pass.skipped")
	// Of a finalizer call's span.
	keyFinalizeTimedOut = attribute.Key("itemops.finalize.timed_out")
	// OpenTelemetry's: the class of an error, on a span whose status is Error.
	keyErrorType = attribute.Key("error.type")
)

// The values of keyRunStep and keyCallCause.
const (
	stepPoll     = "poll"
	stepFinalize = "finalize"

	causeTimeout   = "timeout"   // the operation ran past its timeout
	causeStall     = "stall"     // the operation stalled
	causeCancelled = "cancelled" // its run is being cancelled, or failed on a restart
)
