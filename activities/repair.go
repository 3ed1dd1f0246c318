package activities

import (
	"context"
	"encoding/json"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// RepairInput is the input of Repair.
type RepairInput struct {
	// Ref is the resume's write handle.
	Ref jsonl.HandleRef `json:"ref"`
	// Now is the workflow's clock in Unix milliseconds, the time of a marker
	// after an empty log.
	Now int64 `json:"now"`
}

// RepairResult reports what Repair stored.
type RepairResult struct {
	// Closers is the number of crash closers appended.
	Closers int `json:"closers"`
	// MarkerSeq is the seq of the end-seed marker appended, -1 when none was
	// due (the log already ended with one).
	MarkerSeq int64 `json:"markerSeq"`
	// Appended is the number of events appended (closers + marker).
	Appended int `json:"appended"`
	// Scan describes the log after the repair. Its JSON key is "scan"; a
	// result recorded under the earlier key "summary" is read too.
	Scan LogScan `json:"scan"`
}

// UnmarshalJSON reads a RepairResult, accepting the earlier key "summary"
// for Scan in results recorded before the rename.
func (r *RepairResult) UnmarshalJSON(b []byte) error {
	type plain RepairResult
	var v struct {
		plain
		Scan    *LogScan `json:"scan"`
		Summary *LogScan `json:"summary"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*r = RepairResult(v.plain)
	switch {
	case v.Scan != nil:
		r.Scan = *v.Scan
	case v.Summary != nil:
		r.Scan = *v.Summary
	}
	return nil
}

// Repair performs the crash repair of a resume (FORMAT.md §5.5,
// LIFECYCLE.md §5 step 5) inside the activity: it reads the log through the write handle,
// computes the interrupted-turn closers and the session/end-seed marker, and
// appends them as one batch, so the events never pass through history. A
// retry after success appends nothing: the marker is then the last event and
// no turn is open. It is also registered as LegacyRepairAndMarkName.
func (a *Activities) Repair(ctx context.Context, in RepairInput) (RepairResult, error) {
	st, err := a.store()
	if err != nil {
		return RepairResult{}, err
	}
	defer a.runtime().Heartbeat(ctx, nil).Stop()
	res, err := a.repair(ctx, st.Attach(in.Ref), in.Now)
	return res, MapError(err)
}

func (a *Activities) repair(ctx context.Context, h *jsonl.Handle, now int64) (RepairResult, error) {
	sum, sc, lt, last, err := a.describeLog(ctx, h)
	if err != nil {
		return RepairResult{}, err
	}
	batch, closers, err := sc.CrashRepair(last, now)
	if err != nil {
		return RepairResult{}, asInvalid(err)
	}
	res := RepairResult{Closers: closers, MarkerSeq: -1}
	if len(batch) > closers {
		res.MarkerSeq = batch[len(batch)-1].Seq
	}
	if len(batch) > 0 {
		if err := h.Append(ctx, batch); err != nil {
			return RepairResult{}, err
		}
	}
	res.Appended = len(batch)
	if len(batch) == 0 {
		res.Scan = sum
		return res, nil
	}
	for _, e := range batch {
		lt.observe(e)
	}
	sum.LastTurnInfo = lt.ended()
	final := batch[len(batch)-1]
	sum.EventCount += int64(len(batch))
	sum.NextSeq += int64(len(batch))
	sum.LastType = final.Type
	sum.EndsWithMarker = final.Type == wire.TypeEndSeed
	sum.OpenTurn = nil
	res.Scan = sum
	return res, nil
}
