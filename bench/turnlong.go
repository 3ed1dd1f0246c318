package bench

import (
	"context"
	"fmt"
	"time"

	historypb "go.temporal.io/api/history/v1"
)

// growSample drives one sample workflow, each turn adding GrowBatch
// messages, its prompt and its answer, until a turn fails.
func (e *env) growSample(ctx context.Context, tr *TurnResults) error {
	cfg := e.cfg.Turns
	d := &sampleDriver{e: e}
	if err := d.open(ctx, "grow", 0, cfg.ResponseChunks); err != nil {
		return err
	}
	first := d.runID
	g := &tr.Grow
	g.Outcome = fmt.Sprintf("cap of %d messages reached", cfg.GrowMaxMessages)
	t0 := time.Now()
	for g.Messages < cfg.GrowMaxMessages {
		batch := Conversation(cfg.GrowBatch, cfg.MessageBytes)
		runID, evs, err := e.quiet(ctx, d.wid)
		if err != nil {
			return err
		}
		d.extra = batch
		err = d.turn(ctx, messageText(g.Messages, cfg.MessageBytes))
		d.extra = nil
		if err != nil {
			g.FailedAt = g.Messages + len(batch) + 1
			g.Outcome = fmt.Sprintf("turn %d failed: %v", g.Turns+1, err)
			break
		}
		g.Turns++
		g.Messages = d.messages
		if _, _, err := e.quiet(ctx, d.wid); err != nil {
			return err
		}
		after, _, err := e.history(ctx, d.wid, runID)
		if err != nil {
			return err
		}
		_, g.LastTurnBytes = turnCost(after, len(evs))
	}
	g.Elapsed = time.Since(t0)
	_ = d.close(ctx)
	runs, _, b, last, err := e.chain(ctx, d.wid, first)
	if err != nil {
		return err
	}
	g.Runs, g.HistoryBytes = runs, b
	g.Outcome += "; last run: " + describeEnd(last)
	return nil
}

// longRun runs SessionTurns turns on one new sessionflow session.
func (e *env) longRun(ctx context.Context, d turnDriver, tr *TurnResults) error {
	cfg := e.cfg.Turns
	l := &tr.Long
	if err := d.open(ctx, "long", 0, cfg.ResponseChunks); err != nil {
		return err
	}
	first, _, err := e.quiet(ctx, d.workflowID())
	if err != nil {
		return err
	}
	var times []time.Duration
	t0 := time.Now()
	l.Outcome = fmt.Sprintf("%d turns completed", cfg.SessionTurns)
	for i := 0; i < cfg.SessionTurns; i++ {
		// Reading a run's history costs time growing with the run, so only
		// the first and the last turn are weighed; every turn is timed.
		prompt := messageText(2*i, cfg.MessageBytes)
		var (
			el  time.Duration
			b   int
			err error
		)
		if i == 0 || i == cfg.SessionTurns-1 {
			el, _, b, _, err = e.measuredTurn(ctx, d, prompt)
		} else {
			t1 := time.Now()
			err = d.turn(ctx, prompt)
			el = time.Since(t1)
		}
		if err != nil {
			l.Outcome = fmt.Sprintf("turn %d failed: %v", i+1, err)
			break
		}
		if i == 0 {
			l.FirstTurnBytes = b
		}
		l.LastTurnBytes = b
		times = append(times, el)
		l.Turns++
		if (i+1)%1000 == 0 {
			e.log("  sessionflow long run: %d turns, %s per turn", i+1, ms(el))
		}
	}
	l.Elapsed = time.Since(t0)
	l.Messages = 2 * l.Turns
	l.Time = summarize(times)
	if k := len(times) / 10; k > 0 {
		l.FirstTime = summarize(times[:k]).Median
		l.LastTime = summarize(times[len(times)-k:]).Median
	}
	if err := d.close(ctx); err != nil {
		return err
	}
	return e.eachRun(ctx, d.workflowID(), first, func(evs []*historypb.HistoryEvent, b int) {
		l.Runs++
		l.MaxRunBytes = max(l.MaxRunBytes, b)
		l.MaxRunEvents = max(l.MaxRunEvents, len(evs))
	})
}
