package activities

import (
	"bytes"
	"slices"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// ownTypes are the event types the session workflow's own stores write
// (a turn's batches, EndTurn, an idle Inject's splice, the permission
// facts of SetPermissions): stored events of these types are never taken
// for another caller's append (AppendedRun), and a group store writes
// nothing after one that no batch of its group is (appendGroup: the
// barrier types of jsonl.Handle.AppendGroup).
var ownTypes = []string{
	wire.TypeTurnStart, wire.TypeTurnEnd, wire.TypeStepStart, wire.TypeStepEnd,
	wire.TypeInboxSpliced, wire.TypeSubagentDescriptor,
	wire.TypePermissionPreset, wire.TypeSandboxMode, wire.TypeApprovalPolicy, wire.TypeApprovalRules,
}

// AppendedRun returns, by seq and print, the events an append stored
// where a turn's opening batch goes: held are the stored events from the
// seq of the batch's first event, opening, a turn/start. The run is the
// held events before the first one equal to opening but for `time` (an
// earlier attempt's opening of the same turn, which D77 reconciles), or
// all of them. It returns nil when opening is not a turn/start, when the
// run is empty, or when one of its events has a type the workflow's own
// stores write (ownTypes): such events are not an append that an update
// claims later, and the batch is refused as before.
func AppendedRun(opening session.Event, held []session.Event) ([]jsonl.HeldPrint, error) {
	if opening.Type != wire.TypeTurnStart {
		return nil, nil
	}
	n := 0
	for ; n < len(held); n++ {
		e := held[n]
		if e.Type == opening.Type {
			same, err := equalButTime(opening, e)
			if err != nil {
				return nil, err
			}
			if same {
				break
			}
		}
		if slices.Contains(ownTypes, e.Type) {
			return nil, nil
		}
	}
	if n == 0 {
		return nil, nil
	}
	out := make([]jsonl.HeldPrint, n)
	for i, e := range held[:n] {
		p, err := session.Print(e)
		if err != nil {
			return nil, err
		}
		out[i] = jsonl.HeldPrint{Seq: e.Seq, Print: p}
	}
	return out, nil
}

// equalButTime reports whether a and b are the same event but for their
// seq and `time`, compared in canonical form.
func equalButTime(a, b session.Event) (bool, error) {
	a.Time = b.Time
	x, err := session.PrintKey(a)
	if err != nil {
		return false, err
	}
	y, err := session.PrintKey(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(x, y), nil
}
