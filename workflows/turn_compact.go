package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/wire"
)

// Compaction in a turn (docs/LIFECYCLE.md "Compaction"): the model activity
// measures the step's request and, above the threshold of the context
// window, answers "compact" without calling the model; a provider's
// context-exceeded refusal is stored as the call's finish and answered
// "compact" too. The workflow then runs the Compact activity (one bracket
// per call; a span too long for one summarisation call is compacted in
// pieces, one call each) and calls the model again: once more after a
// compaction under pressure, whatever the request's size then; once more
// after a refusal, when the compaction changed the conversation, else the
// turn ends with the refusal. Only seqs and counts travel through history.

const (
	// maxOverflowRetries is how many times a step compacts after its
	// request was refused as exceeding the context window (the harness's
	// maxOverflowRetries).
	maxOverflowRetries = 1

	// maxCompactCalls bounds the Compact activities of one compaction (its
	// pieces and its rounds under pressure).
	maxCompactCalls = 16
)

// overflowFailure is the end of a step whose request the provider refused
// as exceeding the context window, after its compaction.
type overflowFailure struct {
	pe provider.Error
}

func (f *overflowFailure) Error() string { return f.pe.Error() }

// modelState is what a step's model calls carry from one to the next.
type modelState struct {
	overflows int
	checked   bool
}

// modelStep runs the model call of step, compacting when it asks for it.
func (t *turnRun) modelStep(tctx workflow.Context, step int64) (agent.ModelResult, error) {
	a := t.a
	var st modelState
	for {
		res, err := t.callModel(tctx, step, st)
		if err != nil || res.Compact == "" {
			return res, err
		}
		a.log.follow(res.NextSeq)
		if !a.gates.taken(a.dctx, compactionChange) {
			return res, &overflowFailure{pe: provider.Error{Message: "compaction is not available to this run"}}
		}
		switch res.Compact {
		case agent.TriggerOverflow:
			pe := provider.Error{Code: provider.CodeContextWindowExceeded, Message: "the request exceeds the model's context window"}
			if res.Failure != nil {
				pe = *res.Failure
			}
			if st.overflows >= maxOverflowRetries || t.cause != "" {
				return res, &overflowFailure{pe: pe}
			}
			if _, progressed := t.compact(tctx, agent.TriggerOverflow, ""); !progressed {
				return res, &overflowFailure{pe: pe}
			}
			st.overflows++
		default:
			if res, _ := t.compact(tctx, agent.TriggerPressure, ""); res.Error != "" {
				// A compaction that failed once fails again on the same
				// conversation: the turn's later steps go on without it.
				t.noPressure = true
			}
			st.checked = true
		}
	}
}

// compactInput is the input of the session's Compact activities for
// trigger.
func (a *agentLoop) compactInput(turn int64, trigger, commandID string) agent.CompactInput {
	in := agent.CompactInput{Ref: *a.log.ref, Turn: turn, Trigger: trigger, CommandID: commandID}
	if o := a.agentOptions; o != nil {
		in.Provider, in.Model = o.Provider, o.Model
		if o.ContextWindow != nil {
			in.ContextWindow = int64(*o.ContextWindow)
		}
	}
	return in
}

// compact runs the Compact activities of one compaction in the turn; it
// returns the last result and whether the conversation changed.
func (t *turnRun) compact(tctx workflow.Context, trigger, commandID string) (agent.CompactResult, bool) {
	return t.a.compactions(tctx, t.summary.Turn, trigger, commandID, func() bool { return t.cause != "" })
}

// compactions runs the Compact activities of one compaction owned by turn
// (0: standalone) until the trigger is satisfied, nothing more can be
// compacted, a call fails, or stop reports true. A failed call's open
// bracket is closed (Compact with Close). It returns the last result (its
// Error set when the compaction failed; its Shadowed and ShadowedTokens
// those of every bracket, an earlier piece's checkpoint, which a later piece
// shadows again, not counted twice) and whether any call changed the
// conversation.
func (a *agentLoop) compactions(ctx workflow.Context, turn int64, trigger, commandID string, stop func() bool) (agent.CompactResult, bool) {
	in := a.compactInput(turn, trigger, commandID)
	a.compactingNow = trigger
	defer func() { a.compactingNow = "" }()
	last := agent.CompactResult{SummarySeq: -1}
	progressed := false
	for range maxCompactCalls {
		if stop() {
			break
		}
		in.After = a.log.nextSeq
		var res agent.CompactResult
		err := workflow.ExecuteActivity(a.act(a.set.modelCtx(ctx), compactLabel(turn, trigger)), wire.CompactActivity, in).Get(a.dctx, &res)
		if err != nil {
			msg := errorMessage(unwrapActivity(err))
			workflow.GetLogger(a.ctx).Warn("compaction failed", "session", a.id, "trigger", trigger, "error", msg)
			closeIn := in
			closeIn.Close = "compaction failed: " + msg
			var closed agent.CompactResult
			if cerr := workflow.ExecuteActivity(a.act(a.set.storeCtx(a.dctx), compactLabel(turn, trigger)+" · store its failure"), wire.CompactActivity, closeIn).Get(a.dctx, &closed); cerr == nil {
				a.log.follow(closed.NextSeq)
				progressed = progressed || closed.Progressed()
				if closed.Error == "" && closed.SummarySeq >= 0 {
					last = closed
					break
				}
			}
			last.Error = closeIn.Close
			break
		}
		a.log.follow(res.NextSeq)
		if res.SummarySeq >= 0 && last.SummarySeq >= 0 {
			// This piece shadowed the previous one's checkpoint with the rest.
			res.Shadowed += last.Shadowed - 1
			res.ShadowedTokens += last.ShadowedTokens - last.CheckpointTokens
		}
		res.Pruned += last.Pruned
		last = res
		progressed = progressed || res.Progressed()
		if res.Done || res.Error != "" || !res.Progressed() {
			break
		}
	}
	return last, progressed
}
