package activities

import (
	"encoding/json"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// MaxLastTurnClaims bounds LogScan.LastTurnInfo.Claimed: the ids of the
// latest claimed inputs of the turn are kept.
const MaxLastTurnClaims = wire.MaxPendingInputs

// lastTurnFold follows a log's latest turn: its turn/start, the steps it
// opened, the inputs it claimed (its user/message events) and its
// turn/end, as the workflow's TurnInfo describes a turn.
type lastTurnFold struct {
	info *wire.TurnInfo
}

func (f *lastTurnFold) observe(e session.Event) {
	switch e.Type {
	case wire.TypeTurnStart:
		ts, err := e.TurnStart()
		if err != nil {
			return
		}
		f.info = &wire.TurnInfo{Turn: ts.Turn, StartSeq: e.Seq, Claimed: []string{}}
	case wire.TypeStepStart:
		if f.info == nil || f.info.Reason != nil {
			return
		}
		if ss, err := e.StepStart(); err == nil && ss.Turn == f.info.Turn {
			f.info.Steps = max(f.info.Steps, ss.Step)
		}
	case wire.TypeUserMessage:
		if f.info == nil || f.info.Reason != nil {
			return
		}
		var m struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(e.Data, &m) != nil || m.ID == "" {
			return
		}
		f.info.Claimed = append(f.info.Claimed, m.ID)
		if n := len(f.info.Claimed); n > MaxLastTurnClaims {
			f.info.Claimed = append([]string{}, f.info.Claimed[n-MaxLastTurnClaims:]...)
		}
	case wire.TypeTurnEnd:
		if f.info == nil || f.info.Reason != nil {
			return
		}
		te, err := e.TurnEnd()
		if err != nil || te.Turn != f.info.Turn {
			return
		}
		r := te.Reason
		f.info.Reason = &r
		f.info.EndSeq = e.Seq + 1
	}
}

// ended returns the latest turn when the log holds its turn/end, nil
// otherwise (no turn, or one left open).
func (f *lastTurnFold) ended() *wire.TurnInfo {
	if f.info == nil || f.info.Reason == nil {
		return nil
	}
	c := *f.info
	return &c
}
