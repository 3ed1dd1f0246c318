package bench

import (
	"context"
	"fmt"
	"time"
)

// Patterns compared by the turn measurements.
const (
	// PatternSessionflow is a turn of a live sessionflow session: the
	// conversation stays in the session log.
	PatternSessionflow = "sessionflow"
	// PatternSample is a turn of the agent-sample workflow
	// (SampleWorkflow): the conversation travels through history.
	PatternSample = "agent sample"
	// PatternSessionflowNoSync is sessionflow with its store's fsyncs
	// counted but not made (not durable): the tool rounds' floor
	// measurement, at the first size with one call only.
	PatternSessionflowNoSync = "sessionflow without fsync"
)

// TurnsConfig sizes the turn measurements.
type TurnsConfig struct {
	// Enabled runs them.
	Enabled bool
	// Sizes are the conversation lengths (messages) measured for both
	// patterns, with responses of ResponseChunks chunks.
	Sizes []int
	// Chunks are the response lengths (chunks of ChunkBytes bytes) whose
	// history per turn is measured at the conversation length Sizes[0].
	Chunks     []int
	ChunkBytes int
	// ResponseChunks is the response length of the size measurements.
	ResponseChunks int
	// MessageBytes is the text of every message of a built conversation
	// and of every prompt.
	MessageBytes int
	// Turns is the number of measured turns per point (after Warmup
	// turns); the medians are reported.
	Turns  int
	Warmup int
	// SessionTurns is the number of turns of the long sessionflow run on
	// one session.
	SessionTurns int
	// GrowBatch is the number of messages each turn of the sample's growth
	// run adds besides its prompt and answer; GrowMaxMessages ends the
	// run if no limit did.
	GrowBatch       int
	GrowMaxMessages int
	// Rounds sizes the tool-round measurements, run with the turns.
	Rounds RoundsConfig
}

// DefaultTurnsConfig returns the sizes of the documented run.
func DefaultTurnsConfig() TurnsConfig {
	return TurnsConfig{
		Enabled:         true,
		Sizes:           []int{10, 100, 1_000, 10_000},
		Chunks:          []int{10, 100_000},
		ChunkBytes:      4,
		ResponseChunks:  10,
		MessageBytes:    100,
		Turns:           11,
		Warmup:          2,
		SessionTurns:    500,
		GrowBatch:       500,
		GrowMaxMessages: 1_000_000,
		Rounds:          DefaultRoundsConfig(),
	}
}

// LongSessionTurns is the number of turns of the long sessionflow run
// (-turns-long).
const LongSessionTurns = 10_000

// TurnPoint is one pattern's turns at one conversation and response
// length.
type TurnPoint struct {
	// Pattern is PatternSessionflow or PatternSample.
	Pattern string
	// Messages is the conversation's length before the first measured
	// turn; Chunks the response's length.
	Messages int
	Chunks   int
	// HistoryBytes and HistoryEvents are the medians, over the measured
	// turns, of what one turn added to its run's history (the encoded
	// size of the events, a continue-as-new event excepted).
	HistoryBytes  int
	HistoryEvents int
	// Time is the duration of a turn, from the request until its end is
	// seen by the client.
	Time Stats
	// Parts are where a turn's time went, by part (an activity type from
	// its scheduling to its completion, or the workflow tasks from their
	// scheduling to their completion), in order of first occurrence.
	Parts []TurnPart
	// Load is the 1-minute load average when the point started.
	Load float64
	// Measured is the number of measured turns.
	Measured int
	// Ended is why the turns stopped before Turns were measured; Err is
	// why none could be measured. Both are empty when every turn ran.
	Ended string
	Err   string
}

// TurnPart is one part of a turn's time: Count occurrences in a turn
// taking Median in all (medians over the measured turns).
type TurnPart struct {
	Name   string
	Count  int
	Median time.Duration
}

// LongRun is sessionflow's long run: many turns on one session.
type LongRun struct {
	// Turns is the number of completed turns, Messages the conversation's
	// length at the end.
	Turns    int
	Messages int
	// Runs is the number of runs of the session's workflow id
	// (continue-as-new generations + 1) during the turns.
	Runs int
	// MaxRunBytes and MaxRunEvents are the largest history of one run.
	MaxRunBytes  int
	MaxRunEvents int
	// FirstTurnBytes and LastTurnBytes are the history of the first and
	// the last turn.
	FirstTurnBytes int
	LastTurnBytes  int
	// Time is the duration of a turn over all turns; FirstTime and
	// LastTime the medians of the first and the last tenth of them.
	Time      Stats
	FirstTime time.Duration
	LastTime  time.Duration
	Elapsed   time.Duration
	// Outcome says how it ended.
	Outcome string
}

// GrowRun is the sample's growth run: turns on one workflow until a limit
// ends it.
type GrowRun struct {
	// Turns is the number of completed turns; Messages the conversation's
	// length after the last of them.
	Turns    int
	Messages int
	// FailedAt is the conversation's length the failed turn would have
	// reached (its prompt and added messages in); 0 when none failed.
	FailedAt int
	// Runs is the number of runs of the workflow id.
	Runs int
	// HistoryBytes sums every run's history; LastTurnBytes is what the
	// last completed turn added to its run.
	HistoryBytes  int
	LastTurnBytes int
	// Outcome is the failure, or the cap reached.
	Outcome string
	Elapsed time.Duration
}

// TurnResults are the turn measurements of one run.
type TurnResults struct {
	// Config is their configuration.
	Config TurnsConfig
	// BySize holds, per pattern, one point per conversation length.
	BySize map[string][]TurnPoint
	// ByChunks holds, per pattern, one point per response length.
	ByChunks map[string][]TurnPoint
	// Long is sessionflow's long run; Grow the sample's growth run.
	Long LongRun
	Grow GrowRun
	// Rounds holds the tool-round measurements, nil when not run.
	Rounds *RoundResults
	// Started, Elapsed and the 1-minute load averages before and after
	// the turn measurements.
	Started    time.Time
	Elapsed    time.Duration
	LoadBefore float64
	LoadAfter  float64
}

// Point returns pattern's point of the size measurements at messages, if
// measured.
func (r *TurnResults) Point(pattern string, messages int) (TurnPoint, bool) {
	return find(r.BySize[pattern], messages, r.Config.ResponseChunks)
}

// ChunkPoint returns pattern's point of the response-length measurements
// at chunks, if measured.
func (r *TurnResults) ChunkPoint(pattern string, chunks int) (TurnPoint, bool) {
	if len(r.Config.Sizes) == 0 {
		return TurnPoint{}, false
	}
	return find(r.ByChunks[pattern], r.Config.Sizes[0], chunks)
}

func find(points []TurnPoint, messages, chunks int) (TurnPoint, bool) {
	for _, p := range points {
		if p.Messages == messages && p.Chunks == chunks && p.Err == "" {
			return p, true
		}
	}
	return TurnPoint{}, false
}

// turns runs every turn measurement.
func (e *env) turns(ctx context.Context, res *Results) error {
	cfg := e.cfg.Turns
	tr := &TurnResults{Config: cfg, BySize: map[string][]TurnPoint{}, ByChunks: map[string][]TurnPoint{},
		Started: time.Now(), LoadBefore: LoadAverage()}
	res.Turns = tr
	defer func() {
		tr.Elapsed = time.Since(tr.Started)
		tr.LoadAfter = LoadAverage()
	}()
	if cfg.Rounds.Only {
		return e.rounds(ctx, tr)
	}
	drivers := []struct {
		pattern string
		d       turnDriver
	}{{PatternSessionflow, &flowDriver{e: e}}, {PatternSample, &sampleDriver{e: e}}}
	for _, dr := range drivers {
		pattern, d := dr.pattern, dr.d
		for _, n := range cfg.Sizes {
			p := e.point(ctx, d, pattern, fmt.Sprintf("size-%d", n), n, cfg.ResponseChunks)
			e.log("  %s, %d messages: %d history bytes (%d events) per turn, %s per turn%s", pattern, n, p.HistoryBytes, p.HistoryEvents, ms(p.Time.Median), errSuffix(p))
			tr.BySize[pattern] = append(tr.BySize[pattern], p)
		}
		n := cfg.Sizes[0]
		for _, c := range cfg.Chunks {
			p := e.point(ctx, d, pattern, fmt.Sprintf("chunks-%d", c), n, c)
			e.log("  %s, %d-chunk responses: %d history bytes (%d events) per turn, %s per turn%s", pattern, c, p.HistoryBytes, p.HistoryEvents, ms(p.Time.Median), errSuffix(p))
			tr.ByChunks[pattern] = append(tr.ByChunks[pattern], p)
		}
	}
	if cfg.Rounds.Enabled {
		if err := e.rounds(ctx, tr); err != nil {
			return fmt.Errorf("the tool rounds: %w", err)
		}
	}
	if err := e.growSample(ctx, tr); err != nil {
		return fmt.Errorf("the sample's growth run: %w", err)
	}
	e.log("  sample growth: %d turns, %d messages, %d runs; %s", tr.Grow.Turns, tr.Grow.Messages, tr.Grow.Runs, tr.Grow.Outcome)
	if err := e.longRun(ctx, drivers[0].d, tr); err != nil {
		return fmt.Errorf("the long sessionflow run: %w", err)
	}
	e.log("  sessionflow long run: %d turns, %d runs, largest run %d bytes; %s", tr.Long.Turns, tr.Long.Runs, tr.Long.MaxRunBytes, tr.Long.Outcome)
	return nil
}

func errSuffix(p TurnPoint) string {
	switch {
	case p.Err != "":
		return "; failed: " + p.Err
	case p.Ended != "":
		return fmt.Sprintf("; %d turns measured, then %s", p.Measured, p.Ended)
	}
	return ""
}
