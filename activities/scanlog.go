package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/activity"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// OpenTurnFacts describes an unfinished turn at the end of a log.
type OpenTurnFacts struct {
	// Turn is the open turn's number.
	Turn int64 `json:"turn"`
	// Step is the open step, 0 when none.
	Step int64 `json:"step"`
	// PendingCalls counts tool calls without a result.
	PendingCalls int `json:"pendingCalls"`
	// RecordedCalls counts the pending calls a tool/call event recorded.
	RecordedCalls int `json:"recordedCalls"`
}

// LogScan is a bounded description of a stored log, the result of scanning
// it: never its events.
type LogScan struct {
	// Header is the session header.
	Header wire.Header `json:"header"`
	// EventCount is the number of events in the log.
	EventCount int64 `json:"eventCount"`
	// NextSeq is the seq of the next event.
	NextSeq int64 `json:"nextSeq"`
	// LastTurn is the number of the last turn/start, 0 if none.
	LastTurn int64 `json:"lastTurn"`
	// LastType is the type of the last event, empty for an empty log.
	LastType string `json:"lastType,omitempty"`
	// EndsWithMarker reports whether the last event is a session/end-seed.
	EndsWithMarker bool `json:"endsWithMarker"`
	// OpenTurn describes the unfinished turn, nil when the log is balanced.
	OpenTurn *OpenTurnFacts `json:"openTurn,omitempty"`
	// InheritedEventCount is the fork cut recorded in storage.
	InheritedEventCount int64 `json:"inheritedEventCount"`
	// Inbox holds the agent's pending inputs replayed from the log's
	// agent/inbox/spliced events after the inherited prefix; nil when none.
	Inbox *PendingInbox `json:"inbox,omitempty"`
	// InboxOmitted counts pending inputs left out because together they
	// exceed MaxInboxBytes.
	InboxOmitted int `json:"inboxOmitted,omitempty"`
	// Route is the model route the log records (its last request/context
	// with a provider and a model), nil when it records none. A resume
	// without a route of its own takes it (docs/API.md ResumeSession).
	Route *Route `json:"route,omitempty"`
	// Permissions are the permission facts the log records (its last
	// sandbox/mode, approval/policy, permission/preset and approval/rules,
	// session.PermissionFold), nil when it records none. A resume without
	// permissions of its own takes them.
	Permissions *LoggedPermissions `json:"permissions,omitempty"`
	// LastTurnInfo describes the log's latest turn once it has ended (its
	// turn/end stored: by the turn, or by a resume's crash repair as
	// interrupted), as LoopState's recent turns do; nil when the log has
	// no turn or leaves its latest open. A resume starts its recent turns
	// with it, so WaitTurn answers the turn a crash interrupted
	// (docs/API.md, WaitTurn). Its Claimed holds at most
	// MaxLastTurnClaims ids, the latest.
	LastTurnInfo *wire.TurnInfo `json:"lastTurnInfo,omitempty"`
}

// LoggedPermissions are the permission facts a log records; "" (nil
// Rules) for a fact it does not record. Rules are cut to
// wire.MaxApprovalRules.
type LoggedPermissions struct {
	SandboxMode    string               `json:"sandboxMode,omitempty"`
	ApprovalPolicy string               `json:"approvalPolicy,omitempty"`
	Preset         string               `json:"preset,omitempty"`
	Rules          *[]wire.ApprovalRule `json:"rules,omitempty"`
}

// loggedPermissions returns f's facts, nil when it holds none.
func loggedPermissions(f *session.PermissionFold) *LoggedPermissions {
	if f.SandboxMode == "" && f.ApprovalPolicy == "" && f.Preset == "" && !f.HasRules {
		return nil
	}
	p := &LoggedPermissions{SandboxMode: f.SandboxMode, ApprovalPolicy: f.ApprovalPolicy, Preset: f.Preset}
	if len(p.Preset) > MaxRouteNameBytes {
		p.Preset = ""
	}
	if f.HasRules {
		var rules []wire.ApprovalRule
		for _, r := range f.Rules {
			if len(rules) == wire.MaxApprovalRules {
				break
			}
			if len(r.Tool)+len(r.CommandPrefix)+len(r.PathPrefix) <= MaxRouteNameBytes {
				rules = append(rules, r)
			}
		}
		p.Rules = &rules
	}
	return p
}

// StatInput is the input of Stat.
type StatInput struct {
	// SessionID is the session to describe.
	SessionID string `json:"sessionId"`
}

// StatResult is the output of Stat.
type StatResult struct {
	// Found is false when the session is absent.
	Found bool `json:"found"`
	// Snapshot describes the session when found.
	Snapshot *jsonl.Snapshot `json:"snapshot,omitempty"`
}

// scan reads the log of h in chunks, heartbeating, and feeds every event to
// visit. It returns the number of events and the last one.
func (a *Activities) scan(ctx context.Context, h *jsonl.Handle, visit func(session.Event) error) (int64, *session.Event, error) {
	var (
		offset int64
		last   *session.Event
	)
	chunk := a.chunk()
	for {
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx)
		}
		evs, err := h.Read(ctx, offset, chunk)
		if err != nil {
			return 0, nil, err
		}
		for i := range evs {
			if err := visit(evs[i]); err != nil {
				return 0, nil, err
			}
		}
		if len(evs) > 0 {
			e := evs[len(evs)-1]
			last = &e
		}
		offset += int64(len(evs))
		if int64(len(evs)) < chunk {
			return offset, last, nil
		}
	}
}

// describeLog scans a log into a LogScan and returns the scanner and the
// latest turn's fold too.
func (a *Activities) describeLog(ctx context.Context, h *jsonl.Handle) (LogScan, *session.TurnScanner, *lastTurnFold, *session.Event, error) {
	var sc session.TurnScanner
	var lt lastTurnFold
	inbox := inboxFold{inherited: h.InheritedEventCount()}
	var route routeFold
	var perm session.PermissionFold
	n, last, err := a.scan(ctx, h, func(e session.Event) error {
		if err := sc.Observe(e); err != nil {
			return asInvalid(fmt.Errorf("session %q: event %d: %w", h.ID(), e.Seq, err))
		}
		inbox.observe(e)
		lt.observe(e)
		route.observe(e)
		perm.Add(e)
		return nil
	})
	if err != nil {
		return LogScan{}, nil, nil, nil, err
	}
	sum := LogScan{
		Header:              h.Header(),
		EventCount:          n,
		NextSeq:             n,
		LastTurn:            sc.LastTurn(),
		InheritedEventCount: h.InheritedEventCount(),
		Route:               route.last,
		Permissions:         loggedPermissions(&perm),
		LastTurnInfo:        lt.ended(),
	}
	sum.Inbox, sum.InboxOmitted = inbox.result()
	if last != nil {
		sum.NextSeq = last.Seq + 1
		sum.LastType = last.Type
		sum.EndsWithMarker = last.Type == wire.TypeEndSeed
	}
	if ot, ok := sc.OpenTurn(); ok {
		f := &OpenTurnFacts{Turn: ot.Turn, Step: ot.Step, PendingCalls: len(ot.PendingCalls)}
		for _, c := range ot.PendingCalls {
			if c.Recorded() {
				f.RecordedCalls++
			}
		}
		sum.OpenTurn = f
	}
	return sum, &sc, &lt, last, nil
}

// ScanLog reads the whole validated log through the handle (LIFECYCLE.md
// §5 step 4) and returns a bounded description of it: header, counts, next
// seq, last turn, open-turn facts, the stored inherited count and the
// recorded model route. It never
// returns the events. It heartbeats while it reads. It is also registered as
// LegacyReadSummaryName.
func (a *Activities) ScanLog(ctx context.Context, in HandleInput) (LogScan, error) {
	st, err := a.store()
	if err != nil {
		return LogScan{}, err
	}
	sum, err := cancellable(a.runtime(), ctx, func(ctx context.Context) (LogScan, error) {
		s, _, _, _, err := a.describeLog(ctx, st.Attach(in.Ref))
		return s, err
	})
	return sum, MapError(err)
}

// Stat describes a session without reading its events or taking ownership.
func (a *Activities) Stat(ctx context.Context, in StatInput) (StatResult, error) {
	st, err := a.store()
	if err != nil {
		return StatResult{}, err
	}
	snap, err := st.Stat(ctx, in.SessionID)
	if err != nil {
		return StatResult{}, MapError(err)
	}
	return StatResult{Found: snap != nil, Snapshot: snap}, nil
}
