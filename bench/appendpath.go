package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sessionflow/sessionflow/internal/app/cluster"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// AppendPathResult compares, in one run, the ways an append is stored: the
// entity workflow (the batch kept in workflow state), a sessionflow session
// storing with the local activity (the default) and one storing with the
// AppendBatch activity (Options.ActivityAppends).
type AppendPathResult struct {
	// Entity, Local and Activity are the same appends driven by one caller.
	Entity, Local, Activity EntityResult
	// LocalRate and ActivityRate are single-event appends on one session
	// by AppendCallers pipelined callers; LocalSingle and ActivitySingle by
	// one caller.
	LocalRate, ActivityRate     AppendRate
	LocalSingle, ActivitySingle AppendRate
	// EntitySame and EntityLocalNoop are the entity workflow driven with
	// as many appends as Local, without and with a no-op local activity in
	// each: what an append costs before the store's work.
	EntitySame, EntityLocalNoop EntityResult
	// LocalAtEnd and ActivityAtEnd are single-event appends on one session
	// by AppendCallers callers appending at the end (client.AppendAtEnd),
	// each on its own; LocalAtEndSingle and ActivityAtEndSingle by one such
	// caller.
	LocalAtEnd, ActivityAtEnd             AppendRate
	LocalAtEndSingle, ActivityAtEndSingle AppendRate
}

// LongAppendResult is a session driven through many single-caller appends.
type LongAppendResult struct {
	// Appends is how many were acknowledged; Window how many are averaged
	// at each end.
	Appends, Window int
	// First and Last are the mean append times of the first and the last
	// Window appends.
	First, Last time.Duration
	// Runs is the number of runs of the workflow id (continue-as-new
	// generations + 1); HistoryBytes sums their histories.
	Runs, HistoryBytes int
	// Elapsed is the whole drive.
	Elapsed time.Duration
	// Blocks are the mean append times of consecutive tenths of the drive.
	Blocks []time.Duration
}

// activityReq is createReq with appends stored by the AppendBatch activity.
func (e *env) activityReq(id string) wire.CreateSessionRequest {
	req := e.createReq(id, 0)
	req.Options = &wire.Options{ActivityAppends: true}
	return req
}

// appendPath measures the entity workflow, then the local-activity and the
// activity store on the same appends, then both under one and many
// callers.
func (e *env) appendPath(ctx context.Context, res *Results) error {
	if err := e.checkAdmitsCallers(ctx); err != nil {
		return err
	}
	if err := e.entityComparison(ctx, res); err != nil {
		return err
	}
	out := &AppendPathResult{Entity: res.Entity, Local: res.SessionflowSameLoad}
	n := out.Local.Appends
	var err error
	if out.Activity, err = e.sessionflowSameLoad(ctx, e.activityReq("same-load-activity"), n); err != nil {
		return fmt.Errorf("activity path: %w", err)
	}
	e.log("  sessionflow (activity): %d appends, %.0f history B/event, %s per append",
		out.Activity.Appends, out.Activity.BytesPerEvent(), out.Activity.PerAppend)
	if out.EntitySame, err = e.entityDrive(ctx, "entity-same", EntityState{}, n); err != nil {
		return fmt.Errorf("entity, %d appends: %w", n, err)
	}
	if out.EntityLocalNoop, err = e.entityDrive(ctx, "entity-local-noop", EntityState{LocalNoop: true}, n); err != nil {
		return fmt.Errorf("entity with a local activity, %d appends: %w", n, err)
	}
	e.log("  %d appends: entity %s, entity with a no-op local activity %s, sessionflow %s (its fsyncs %s) per append",
		n, out.EntitySame.PerAppend, out.EntityLocalNoop.PerAppend, out.Local.PerAppend, out.Local.SyncTime)
	callers := e.cfg.AppendCallers
	if out.LocalRate, err = e.appendRateReq(ctx, e.createReq("rate-local", 0), 0, callers); err != nil {
		return fmt.Errorf("local path, %d callers: %w", callers, err)
	}
	if out.ActivityRate, err = e.appendRateReq(ctx, e.activityReq("rate-activity"), 0, callers); err != nil {
		return fmt.Errorf("activity path, %d callers: %w", callers, err)
	}
	if out.LocalAtEnd, err = e.appendRateMode(ctx, e.createReq("atend-local", 0), 0, callers, true); err != nil {
		return fmt.Errorf("local path, %d callers at the end: %w", callers, err)
	}
	if out.ActivityAtEnd, err = e.appendRateMode(ctx, e.activityReq("atend-activity"), 0, callers, true); err != nil {
		return fmt.Errorf("activity path, %d callers at the end: %w", callers, err)
	}
	if out.LocalSingle, err = e.appendRateReq(ctx, e.createReq("single-local", 0), 0, 1); err != nil {
		return fmt.Errorf("local path, one caller: %w", err)
	}
	if out.ActivitySingle, err = e.appendRateReq(ctx, e.activityReq("single-activity"), 0, 1); err != nil {
		return fmt.Errorf("activity path, one caller: %w", err)
	}
	if out.LocalAtEndSingle, err = e.appendRateMode(ctx, e.createReq("atend-single-local", 0), 0, 1, true); err != nil {
		return fmt.Errorf("local path, one caller at the end: %w", err)
	}
	if out.ActivityAtEndSingle, err = e.appendRateMode(ctx, e.activityReq("atend-single-activity"), 0, 1, true); err != nil {
		return fmt.Errorf("activity path, one caller at the end: %w", err)
	}
	e.log("  %d callers: local %.1f appends/s, activity %.1f appends/s; at the end: local %.1f, activity %.1f; one caller: local %.1f, activity %.1f; one at the end: local %.1f, activity %.1f",
		callers, out.LocalRate.PerSecond(), out.ActivityRate.PerSecond(), out.LocalAtEnd.PerSecond(), out.ActivityAtEnd.PerSecond(),
		out.LocalSingle.PerSecond(), out.ActivitySingle.PerSecond(), out.LocalAtEndSingle.PerSecond(), out.ActivityAtEndSingle.PerSecond())
	res.AppendPath = out
	return nil
}

// longAppendWindow is how many appends are averaged at each end of the long
// drive.
const longAppendWindow = 1000

// longAppends drives one session through cfg.LongAppends single-event
// appends by one caller and compares the mean append time at the start and
// at the end; the session continues as new on its own on the way.
func (e *env) longAppends(ctx context.Context, res *Results) error {
	const id = "long-appends"
	total := e.cfg.LongAppends
	window := min(longAppendWindow, max(1, total/2))
	info, err := e.sf.Create(ctx, e.createReq(id, 0))
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	r := &LongAppendResult{Window: window}
	seq := info.NextSeq
	var first, last, block time.Duration
	blockLen := max(1, total/10)
	t0 := time.Now()
	for i := 0; i < total; i++ {
		ev, err := event(seq, 64)
		if err != nil {
			return err
		}
		s0 := time.Now()
		if _, err := e.sf.Append(ctx, id, session.WireEvents([]session.Event{ev})); err != nil {
			return fmt.Errorf("append %d: %w", i+1, err)
		}
		d := time.Since(s0)
		if i < window {
			first += d
		}
		if i >= total-window {
			last += d
		}
		if block += d; (i+1)%blockLen == 0 {
			r.Blocks = append(r.Blocks, block/time.Duration(blockLen))
			block = 0
		}
		seq++
		r.Appends++
		if (i+1)%10_000 == 0 {
			e.log("  %d appends, %s", i+1, time.Since(t0).Round(time.Second))
		}
	}
	r.Elapsed = time.Since(t0)
	r.First, r.Last = first/time.Duration(window), last/time.Duration(window)
	dr, err := e.sf.Dispose(ctx, id)
	if err != nil {
		return fmt.Errorf("dispose: %w", err)
	}
	if got := dr.NextSeq - info.NextSeq; got != int64(total) {
		return fmt.Errorf("stored %d events, acknowledged %d", got, total)
	}
	runs, _, hb, _, err := e.chain(ctx, info.WorkflowID, info.RunID)
	if err != nil {
		return err
	}
	r.Runs, r.HistoryBytes = runs, hb
	e.log("  %d appends: first %d %s, last %d %s per append; %d runs", total, window, r.First, window, r.Last, runs)
	res.LongAppends = r
	return nil
}

// AppendPathReport renders the append path comparison and the long
// session's appends (whichever ran) as a section of docs/PERFORMANCE.md.
func AppendPathReport(res *Results) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	if a := res.AppendPath; a != nil {
		cfg := res.Config
		p("### The append path: local activity, activity and the entity workflow\n\n")
		cmd := "the run above"
		if cfg.AppendPathOnly {
			cmd = "`go run ./bench/cmd/perf -append-path-only`"
		}
		p("One run (%s), %s, 1-minute load average %.2f before\n",
			cmd, res.Started.UTC().Format("2006-01-02 15:04 MST"), res.LoadBefore)
		p("and %.2f after. The same appends (%d events of %d bytes of text each, one caller) go to the\n", res.LoadAfter, cfg.EntityBatch, cfg.EntityEventBytes)
		p("entity workflow, to a session storing with the local activity (the default) and to one storing\n")
		p("with the `AppendBatch` activity (`Options.ActivityAppends`); then single-event appends for %s\n", cfg.AppendDuration)
		p("each, by %d pipelined callers choosing their seqs (each takes the next seq under a lock held until\n", cfg.AppendCallers)
		p("its append is accepted) and by one, then by %d callers appending at the end (`client.AppendAtEnd`,\n", cfg.AppendCallers)
		p("each on its own, its next append once the last is stored) and by one, on a session of each path.\n")
		p("Ratios are against the entity workflow, and for the rates against the activity path. The server:\n")
		p("%s.\n\n", serverDescription(cfg))
		p("| measure | entity workflow | local activity | activity | local / entity | local / activity |\n|---|---|---|---|---|---|\n")
		p("| appends (events) | %d (%d) | %d (%d) | %d (%d) | - | - |\n", a.Entity.Appends, a.Entity.Events, a.Local.Appends, a.Local.Events, a.Activity.Appends, a.Activity.Events)
		p("| history bytes per appended event | %.0f | %.0f | %.0f | %s | %s |\n",
			a.Entity.BytesPerEvent(), a.Local.BytesPerEvent(), a.Activity.BytesPerEvent(),
			ratio(a.Local.BytesPerEvent(), a.Entity.BytesPerEvent()), ratio(a.Local.BytesPerEvent(), a.Activity.BytesPerEvent()))
		p("| history events per append | %.1f | %.1f | %.1f | - | - |\n",
			perAppend(a.Entity), perAppend(a.Local), perAppend(a.Activity))
		p("| time per append (mean, one caller) | %s | %s | %s | %s | %s |\n",
			ms(a.Entity.PerAppend), ms(a.Local.PerAppend), ms(a.Activity.PerAppend),
			ratio(float64(a.Local.PerAppend), float64(a.Entity.PerAppend)), ratio(float64(a.Local.PerAppend), float64(a.Activity.PerAppend)))
		p("| single-event appends/s, one caller | - | %.1f | %.1f | - | %s |\n",
			a.LocalSingle.PerSecond(), a.ActivitySingle.PerSecond(), ratio(a.LocalSingle.PerSecond(), a.ActivitySingle.PerSecond()))
		p("| single-event appends/s, %d callers | - | %.1f | %.1f | - | %s |\n",
			cfg.AppendCallers, a.LocalRate.PerSecond(), a.ActivityRate.PerSecond(), ratio(a.LocalRate.PerSecond(), a.ActivityRate.PerSecond()))
		p("| median latency, %d callers | - | %s | %s | - | - |\n", cfg.AppendCallers, ms(a.LocalRate.Latency.Median), ms(a.ActivityRate.Latency.Median))
		p("| the worker store's fsyncs per append (mean time, one caller) | - | %s | %s | - | - |\n", syncCell(a.Local), syncCell(a.Activity))
		if a.LocalAtEnd.Appends > 0 {
			p("| single-event appends/s, %d callers at the end | - | %.1f | %.1f | - | %s |\n",
				cfg.AppendCallers, a.LocalAtEnd.PerSecond(), a.ActivityAtEnd.PerSecond(), ratio(a.LocalAtEnd.PerSecond(), a.ActivityAtEnd.PerSecond()))
			p("| median latency, %d callers at the end | - | %s | %s | - | - |\n", cfg.AppendCallers, ms(a.LocalAtEnd.Latency.Median), ms(a.ActivityAtEnd.Latency.Median))
		}
		if a.LocalAtEndSingle.Appends > 0 {
			p("| single-event appends/s, one caller at the end | - | %.1f | %.1f | - | %s |\n",
				a.LocalAtEndSingle.PerSecond(), a.ActivityAtEndSingle.PerSecond(), ratio(a.LocalAtEndSingle.PerSecond(), a.ActivityAtEndSingle.PerSecond()))
		}
		p("\n")
		writeAppendFloor(p, a)
		bytesR := a.Local.BytesPerEvent() / a.Entity.BytesPerEvent()
		timeR := float64(a.Local.PerAppend) / float64(a.Entity.PerAppend)
		rateR := a.LocalRate.PerSecond() / a.ActivityRate.PerSecond()
		p("| target | result | |\n|---|---|---|\n")
		p("| history bytes per appended event <= 1.1x the entity workflow's | %.2fx | %s |\n", bytesR, met(bytesR <= 1.1))
		p("| mean time per single-caller append <= 1.0x the entity workflow's | %.2fx | %s |\n", timeR, met(timeR <= 1.0))
		p("| %d-caller appends/s on one session >= 3x the activity path's (pipelined callers) | %.2fx | %s |\n", cfg.AppendCallers, rateR, met(rateR >= 3))
		if a.LocalAtEnd.Appends > 0 {
			endR := a.LocalAtEnd.PerSecond() / a.ActivityAtEnd.PerSecond()
			pipeR := a.LocalAtEnd.PerSecond() / a.ActivityRate.PerSecond()
			oneR := a.LocalAtEnd.PerSecond() / a.LocalSingle.PerSecond()
			p("| %d callers at the end, local path, >= 3x %d callers at the end on the activity path | %.2fx | %s |\n", cfg.AppendCallers, cfg.AppendCallers, endR, met(endR >= 3))
			p("| %d callers at the end, local path, >= 3x %d pipelined callers on the activity path | %.2fx | %s |\n", cfg.AppendCallers, cfg.AppendCallers, pipeR, met(pipeR >= 3))
			p("| %d callers at the end, local path, >= 2.5x one caller choosing its seqs, local path | %.2fx | %s |\n", cfg.AppendCallers, oneR, met(oneR >= 2.5))
			if a.LocalAtEndSingle.Appends > 0 {
				oneEndR := a.LocalAtEnd.PerSecond() / a.LocalAtEndSingle.PerSecond()
				p("| %d callers at the end, local path, >= 2.5x one caller at the end, local path | %.2fx | %s |\n", cfg.AppendCallers, oneEndR, met(oneEndR >= 2.5))
			}
		}
		p("\n")
	}
	if l := res.LongAppends; l != nil {
		p("### A long session's appends\n\n")
		p("%d single-event appends (64 bytes of text) by one caller on one session with the default\n", l.Appends)
		p("options (`go run ./bench/cmd/perf -long-appends %d`): the session continues as\n", l.Appends)
		p("new on its own at %d history events (`options.continueAsNewEvents`, DECISIONS D64) or when the\n", workflows.DefaultContinueAsNewEvents)
		p("server suggests it, whichever comes first. Mean append time of the first and the last %d appends.\n\n", l.Window)
		p("| appends | runs | history bytes (all runs) | first %d | last %d | last / first | whole drive |\n|---|---|---|---|---|---|---|\n", l.Window, l.Window)
		p("| %d | %d | %.1f MiB | %s | %s | %s | %s |\n\n", l.Appends, l.Runs, float64(l.HistoryBytes)/(1<<20),
			ms(l.First), ms(l.Last), ratio(float64(l.Last), float64(l.First)), l.Elapsed.Round(time.Second))
		if len(l.Blocks) > 0 {
			parts := make([]string, len(l.Blocks))
			for i, d := range l.Blocks {
				parts[i] = ms(d)
			}
			p("Mean append time of each tenth of the drive, in order: %s.\n\n", strings.Join(parts, ", "))
		}
	}
	return b.String()
}

func perAppend(r EntityResult) float64 {
	if r.Appends == 0 {
		return 0
	}
	return float64(r.HistoryEvents) / float64(r.Appends)
}

// syncCell renders the store's fsyncs per append of r: their number and
// mean time.
func syncCell(r EntityResult) string {
	if r.Appends == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f, %s", float64(r.Syncs)/float64(r.Appends), ms(r.SyncTime))
}

// serverDescription says which Temporal server a run measured, and whether
// its writes reach a disk.
func serverDescription(cfg Config) string {
	if cfg.TemporalAddress != "" {
		return fmt.Sprintf("the Temporal server at %s (`-temporal-address`), its history written by its own persistence", cfg.TemporalAddress)
	}
	return "the embedded dev server with its state in memory (`Ephemeral`), so the entity workflow's appends reach no disk, while sessionflow's are fsynced by the store"
}

// writeAppendFloor renders where a single-caller append's time goes: the
// entity workflow with as many appends, the same with a no-op local
// activity in each, and sessionflow's local path with its store's fsyncs.
func writeAppendFloor(p func(string, ...any), a *AppendPathResult) {
	ent, la, sf := a.EntitySame, a.EntityLocalNoop, a.Local
	if ent.Appends == 0 || la.Appends == 0 || sf.Appends == 0 {
		return
	}
	p("Where a single-caller append's time goes (%d appends each, means): the entity workflow again\n", sf.Appends)
	p("with as many appends as sessionflow made, the same with a no-op local activity run in every\n")
	p("append's workflow task before it is answered, and sessionflow's local path, whose local activity\n")
	p("writes and fsyncs the batch:\n\n")
	p("| | time per append | over the entity workflow |\n|---|---|---|\n")
	p("| entity workflow | %s | - |\n", ms(ent.PerAppend))
	p("| entity workflow + a no-op local activity | %s | %s |\n", ms(la.PerAppend), signedMs(la.PerAppend-ent.PerAppend))
	p("| sessionflow, local activity storing the batch | %s | %s |\n", ms(sf.PerAppend), signedMs(sf.PerAppend-ent.PerAppend))
	p("| of which the store's fsync | %s | - |\n\n", ms(sf.SyncTime))
}

// signedMs renders d in milliseconds with its sign.
func signedMs(d time.Duration) string {
	if d < 0 {
		return "-" + ms(-d)
	}
	return "+" + ms(d)
}

// checkAdmitsCallers fails unless the server admits the AppendCallers
// callers' updates in flight on one workflow at once. Beyond its limit
// (history.maxInFlightUpdates, 10 unless its dynamic config raises it, as
// deploy/dynamicconfig/sessionflow.yaml and the dev server do) it refuses
// the others' updates, the SDK sends them again after 400 ms or more, and
// the rates measure that backoff: a cluster launched with a stale build
// ran with 10.
func (e *env) checkAdmitsCallers(ctx context.Context) error {
	n := e.cfg.AppendCallers
	got, err := cluster.AdmittedUpdates(ctx, e.tc, e.sf.Namespace(), n)
	if err != nil {
		return fmt.Errorf("asking the server for its limit of updates in flight: %w", err)
	}
	if got < n {
		return fmt.Errorf("the server admits %d updates in flight on one workflow (history.maxInFlightUpdates), fewer than the %d callers: run it with deploy/dynamicconfig/sessionflow.yaml (a local cluster from a current build of ./cmd/cluster)", got, n)
	}
	e.log("  the server admits the %d callers' updates in flight on one workflow", n)
	return nil
}
