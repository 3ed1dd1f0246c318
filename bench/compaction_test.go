package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	updatepb "go.temporal.io/api/update/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// TestCompactionSmoke runs the compaction measurement at a small size
// against a real dev server: 60 turns in a 4000-token window complete, no
// request exceeds the window, the conversation compacts, the log is
// balanced and the history of a turn stays flat.
func TestCompactionSmoke(t *testing.T) {
	cfg := DefaultCompactionConfig()
	cfg.Turns = 60
	cfg.Window = 4000
	cfg.SampleTurns = 10
	cfg.ModuleDir = ".."
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := RunCompaction(ctx, cfg)
	require.NoError(t, err)

	require.Equal(t, "60 turns completed", res.Outcome)
	require.Equal(t, 60, res.Turns)
	require.Len(t, res.TurnTimes, 60)
	require.Positive(t, res.MaxRequestTokens)
	require.LessOrEqual(t, res.MaxRequestTokens, 4000, "no request above the window")
	require.Equal(t, res.MaxRequestTokens, res.MaxRecordedTokens(), "the recorder saw what the scripted provider saw")
	require.Zero(t, res.Refusals())
	require.Equal(t, 0.8, res.Threshold)

	l := res.Log
	require.Empty(t, l.Problems)
	require.True(t, res.Balanced(), "%+v", l)
	require.Equal(t, 60, l.TurnStarts)
	require.Equal(t, 60, l.Completed)
	require.GreaterOrEqual(t, l.Compactions, 2, "a 4000-token window holds a few turns of 2 KB")
	require.GreaterOrEqual(t, l.Summaries, l.Compactions)
	require.Zero(t, l.EndErrors)
	require.Equal(t, l.Summaries, res.ScriptedCompactionCalls, "one summarisation call per piece")
	var summaryCalls int
	for _, c := range res.Calls {
		if c.Compaction {
			summaryCalls++
		}
	}
	require.Equal(t, l.Summaries, summaryCalls)

	// History: the Compact activities group into the log's compactions, and
	// every turn is accepted by one run.
	times := res.CompactionTimes()
	require.Len(t, times, l.Compactions)
	for _, d := range times {
		require.Positive(t, d)
	}
	turns := 0
	for _, r := range res.Runs {
		turns += r.Turns
	}
	require.Equal(t, 60, turns)
	for _, c := range res.Compacts {
		require.Equal(t, "pressure", c.Trigger)
		require.False(t, c.Failed)
	}

	// The samples: ten turns each, and a turn's history as large at the
	// end as at the start.
	require.Len(t, res.Samples, 3)
	for _, s := range res.Samples {
		require.Len(t, s.Turns, 10, s.Name)
	}
	// The one-off events of a run: the session's first turn starts the
	// first run, its first compacting turn records the compaction's
	// version marker, and the turn after a continue-as-new starts a run.
	start := res.Samples[0].Turns
	require.True(t, start[0].RunFirst)
	var firstCompaction []int
	for _, st := range start {
		if st.RunFirstCompaction {
			firstCompaction = append(firstCompaction, st.Turn)
		}
	}
	for _, st := range start {
		if st.Compacts > 0 {
			require.Equal(t, []int{st.Turn}, firstCompaction, "the first compacting turn of the run, only")
			break
		}
	}
	for _, s := range res.Samples {
		for i, st := range s.Turns[:len(s.Turns)-1] {
			require.Equal(t, st.ContinuedAsNew, s.Turns[i+1].RunFirst, "turn %d", s.Turns[i+1].Turn)
		}
	}
	a, z := statsOf(res.Samples[0]), statsOf(res.Samples[2])
	require.Positive(t, a.groups[0].n)
	require.Positive(t, z.groups[0].n)
	require.InEpsilon(t, a.groups[0].bytes, z.groups[0].bytes, 0.05, "a turn's history does not grow with the session")

	section := CompactionReport(res)
	require.True(t, strings.HasPrefix(section, CompactionBegin+"\n## Compaction: 60 turns in a 4000-token window\n"))
	require.True(t, strings.HasSuffix(section, CompactionEnd+"\n"))
	require.Contains(t, section, "| the session completes its 60 turns | 60 turns completed | met |")
	require.Contains(t, section, "| no `CONTEXT_WINDOW_EXCEEDED` refusal | 0 | met |")
	require.NotContains(t, section, "missed")
	png, err := CompactionPNG(res)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")))
}

func TestCallRecorderRecordsWhatTheScriptedProviderReceives(t *testing.T) {
	sp, err := scripted.New(scripted.Script{Loop: true, ContextWindow: 100, Responses: []scripted.Response{{Text: "ok"}}})
	require.NoError(t, err)
	rec := &callRecorder{p: sp}
	require.Equal(t, int64(100), rec.ContextWindow())
	drain := func(req provider.Request) error {
		for _, err := range rec.Stream(context.Background(), req) {
			if err != nil {
				return err
			}
		}
		return nil
	}
	msg := func(text string) []provider.Message {
		return []provider.Message{{Role: provider.RoleUser, Content: []provider.Block{{Type: provider.BlockText, Text: text}}}}
	}
	small := provider.Request{SessionID: "s", Messages: msg("hello")}
	large := provider.Request{SessionID: "s", Messages: msg(strings.Repeat("word ", 200))}
	summary := provider.Request{SessionID: "s", Messages: msg("summarise"), Purpose: provider.PurposeCompaction}

	rec.setTurn(1)
	require.NoError(t, drain(small))
	rec.setTurn(2)
	err = drain(large)
	var pe *provider.Error
	require.ErrorAs(t, err, &pe)
	require.Equal(t, "CONTEXT_WINDOW_EXCEEDED", pe.Code)
	require.NoError(t, drain(summary))

	// 2 + 4 + 4 tokens for "hello" in one block of one message; 250 + 4 + 4
	// for the thousand characters.
	require.Equal(t, []ModelCall{
		{Turn: 1, Tokens: 10},
		{Turn: 2, Tokens: 258, Refused: true},
		{Turn: 2, Compaction: true, Tokens: 11},
	}, rec.recorded())
	require.Equal(t, 258, sp.MaxRequestTokens("s"))

	// A consumer that stops early still gets its call recorded.
	rec.setTurn(3)
	for range rec.Stream(context.Background(), small) {
		break
	}
	require.Len(t, rec.recorded(), 4)
	require.Equal(t, ModelCall{Turn: 3, Tokens: 10}, rec.recorded()[3])
}

// logEvent builds one event of a synthetic log.
func logEvent(t *testing.T, seq int64, typ string, data any) session.Event {
	t.Helper()
	e, err := session.NewEvent(typ, seq, 1, data)
	require.NoError(t, err)
	return e
}

// compactedLog is a turn holding one compaction of two pieces, then a turn
// holding another compaction, as the Compact activities store them.
func compactedLog(t *testing.T) []session.Event {
	var evs []session.Event
	add := func(typ string, data any) {
		evs = append(evs, logEvent(t, int64(len(evs)), typ, data))
	}
	bracket := func(id string) {
		add(wire.TypeCompactionStart, map[string]any{"compactionId": id, "turn": 1})
		add(wire.TypeCompactionSummary, map[string]any{"compactionId": id})
		e := logEvent(t, int64(len(evs)), wire.TypeUserMessage, map[string]any{"role": "user"})
		e.SurfaceOp = &session.SurfaceOp{Op: session.SurfaceReplace, StartSeq: 1, EndSeq: 1}
		evs = append(evs, e)
		add(wire.TypeCompactionEnd, map[string]any{"compactionId": id, "turn": 1})
	}
	for turn, ids := range [][]string{{"a", "b"}, {"c"}} {
		add(wire.TypeTurnStart, wire.TurnStart{Turn: int64(turn + 1)})
		add(wire.TypeUserMessage, map[string]any{"role": "user"})
		for _, id := range ids {
			bracket(id)
		}
		add(wire.TypeAssistantMessage, map[string]any{"turn": turn + 1})
		add(wire.TypeTurnEnd, wire.TurnEnd{Turn: int64(turn + 1), Reason: wire.TurnEndReason{Kind: wire.TurnEndCompleted}})
	}
	return evs
}

func TestAnalyzeLogCountsCompactionsAndPieces(t *testing.T) {
	l := analyzeLog(compactedLog(t))
	require.Empty(t, l.Problems)
	require.Equal(t, 2, l.Compactions, "brackets in a row are the pieces of one compaction")
	require.Equal(t, 3, l.Starts)
	require.Equal(t, 3, l.Summaries)
	require.Equal(t, 3, l.Ends)
	require.Equal(t, 2, l.TurnStarts)
	require.Equal(t, 2, l.Completed)
	r := &CompactionResults{Log: l}
	require.True(t, r.Balanced())
}

func TestAnalyzeLogFindsImbalances(t *testing.T) {
	cases := []struct {
		name  string
		plant func([]session.Event) []session.Event
		want  string
	}{
		{"an end of another compaction", func(evs []session.Event) []session.Event {
			evs[5].Data = json.RawMessage(`{"compactionId":"x"}`)
			return evs
		}, "seq 5: compaction/end of x inside compaction a (started at 2)"},
		{"a bracket never closed", func(evs []session.Event) []session.Event {
			return evs[:len(evs)-5]
		}, "compaction c (started at 14) is not closed"},
		{"the summary's replacement missing", func(evs []session.Event) []session.Event {
			evs[4].SurfaceOp = session.AppendOp()
			return evs
		}, "seq 4: user/message after the compaction/summary at 3, not its replacing user/message"},
		{"an end without a summary or an error", func(evs []session.Event) []session.Event {
			evs[3].Type = wire.TypeAssistantMessage
			return evs
		}, "seq 5: compaction/end of a without a summary or an error"},
		{"a turn ending inside a bracket", func(evs []session.Event) []session.Event {
			evs[4] = logEvent(t, 4, wire.TypeTurnEnd, wire.TurnEnd{Turn: 1})
			return evs
		}, "seq 4: turn/end inside compaction a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := analyzeLog(c.plant(compactedLog(t)))
			require.Contains(t, l.Problems, c.want)
			require.False(t, (&CompactionResults{Log: l}).Balanced())
		})
	}
}

func TestAnalyzeRunsTimesTheCompactActivities(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) *timestamppb.Timestamp {
		return timestamppb.New(t0.Add(time.Duration(ms) * time.Millisecond))
	}
	payload := func(s string) *commonpb.Payloads {
		return &commonpb.Payloads{Payloads: []*commonpb.Payload{{Data: []byte(s)}}}
	}
	var id int64
	ev := func(ms int, typ enumspb.EventType) *historypb.HistoryEvent {
		id++
		return &historypb.HistoryEvent{EventId: id, EventType: typ, EventTime: at(ms)}
	}
	followup := func(ms int, name string) *historypb.HistoryEvent {
		e := ev(ms, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
		e.Attributes = &historypb.HistoryEvent_WorkflowExecutionUpdateAcceptedEventAttributes{WorkflowExecutionUpdateAcceptedEventAttributes: &historypb.WorkflowExecutionUpdateAcceptedEventAttributes{
			AcceptedRequest: &updatepb.Request{Input: &updatepb.Input{Name: name}}}}
		return e
	}
	schedule := func(ms int, name, input string) *historypb.HistoryEvent {
		e := ev(ms, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
		e.Attributes = &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
			ActivityType: &commonpb.ActivityType{Name: name}, Input: payload(input)}}
		return e
	}
	complete := func(ms int, scheduled int64, result string) *historypb.HistoryEvent {
		e := ev(ms, enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)
		e.Attributes = &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{
			ScheduledEventId: scheduled, Result: payload(result)}}
		return e
	}
	fail := func(ms int, scheduled int64) *historypb.HistoryEvent {
		e := ev(ms, enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED)
		e.Attributes = &historypb.HistoryEvent_ActivityTaskFailedEventAttributes{ActivityTaskFailedEventAttributes: &historypb.ActivityTaskFailedEventAttributes{ScheduledEventId: scheduled}}
		return e
	}
	// Run 1: a turn whose model call asks for a compaction of two Compact
	// activities, then a turn whose model call asks for one of one; it
	// continues as new. Run 2: a turn whose compaction fails and is closed.
	run1 := []*historypb.HistoryEvent{
		followup(0, wire.UpdateFollowup),
		schedule(1, wire.CallModelActivity, `{}`), complete(3, 2, `{"compact":"pressure"}`),
		schedule(3, wire.CompactActivity, `{"trigger":"pressure"}`), complete(13, 4, `{"summarySeq":7}`),
		schedule(13, wire.CompactActivity, `{"trigger":"pressure"}`), complete(20, 6, `{"summarySeq":-1,"done":true}`),
		schedule(20, wire.CallModelActivity, `{}`), complete(22, 8, `{}`),
		followup(30, wire.UpdateFollowup), followup(31, wire.UpdateDispose),
		schedule(31, wire.CallModelActivity, `{}`), complete(33, 12, `{"compact":"pressure"}`),
		schedule(33, wire.CompactActivity, `{"trigger":"pressure"}`), complete(38, 14, `{"summarySeq":30}`),
		schedule(38, wire.CallModelActivity, `{}`), complete(39, 16, `{}`),
		ev(40, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW),
	}
	id = 0
	run2 := []*historypb.HistoryEvent{
		followup(50, wire.UpdateFollowup),
		schedule(51, wire.CallModelActivity, `{}`), complete(52, 2, `{}`),
		schedule(52, wire.CompactActivity, `{"trigger":"overflow"}`), fail(60, 4),
		schedule(60, wire.CompactActivity, `{"trigger":"overflow","close":"failed"}`), complete(61, 6, `{"summarySeq":-1}`),
	}
	runs, compacts := analyzeRuns([][]*historypb.HistoryEvent{run1, run2}, []int{1000, 400})
	require.Equal(t, []RunHistory{
		{Turns: 2, Events: len(run1), Bytes: 1000, StartBytes: proto.Size(run1[0]), Compacts: 3, ContinuedAsNew: true},
		{Turns: 1, Events: len(run2), Bytes: 400, StartBytes: proto.Size(run2[0]), Compacts: 2},
	}, runs)
	require.Equal(t, []CompactActivity{
		{Compaction: 0, Trigger: "pressure", Summarised: true, Time: 10 * time.Millisecond},
		{Compaction: 0, Trigger: "pressure", Time: 7 * time.Millisecond},
		{Compaction: 1, Trigger: "pressure", Summarised: true, Time: 5 * time.Millisecond},
		{Compaction: 2, Trigger: "overflow", Failed: true, Time: 8 * time.Millisecond},
		{Compaction: 2, Trigger: "overflow", Time: time.Millisecond},
	}, compacts)
	r := &CompactionResults{Compacts: compacts}
	require.Equal(t, []time.Duration{17 * time.Millisecond, 5 * time.Millisecond, 9 * time.Millisecond}, r.CompactionTimes())
}

func TestCompactionEdgesAndRefusals(t *testing.T) {
	r := &CompactionResults{Calls: []ModelCall{
		{Turn: 1, Tokens: 100}, {Turn: 2, Tokens: 300}, {Turn: 3, Tokens: 500},
		{Turn: 4, Compaction: true, Tokens: 450}, {Turn: 4, Tokens: 150},
		{Turn: 5, Tokens: 350}, {Turn: 5, Tokens: 900, Refused: true},
		{Turn: 6, Compaction: true, Tokens: 500}, {Turn: 6, Tokens: 200},
	}}
	peaks, troughs, gaps := r.edges()
	require.Equal(t, []int{500, 350}, peaks, "the last answered ordinary call before each compacting turn")
	require.Equal(t, []int{150, 200}, troughs, "the compacting turn's call after its compaction")
	require.Equal(t, []int{2}, gaps)
	require.Equal(t, 1, r.Refusals())
	require.Equal(t, 900, r.MaxRecordedTokens())
}

func TestCompactionResultsRenderAgainFromJSON(t *testing.T) {
	r := &CompactionResults{
		Config:  CompactionConfig{Turns: 4, Window: 1000, MessageBytes: 10, SampleTurns: 1, Progress: os.Stderr},
		Started: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Threshold: 0.8, Retain: 0.16,
		Turns: 4, Outcome: "4 turns completed", TurnTimes: []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, time.Millisecond},
		Calls:    []ModelCall{{Turn: 1, Tokens: 500}, {Turn: 2, Tokens: 790}, {Turn: 3, Compaction: true, Tokens: 700}, {Turn: 3, Tokens: 300}, {Turn: 4, Tokens: 560}},
		Compacts: []CompactActivity{{Compaction: 0, Trigger: "pressure", Summarised: true, Time: 2 * time.Millisecond}},
		Runs:     []RunHistory{{Turns: 2, Events: 30, Bytes: 7000, StartBytes: 300, ContinuedAsNew: true}, {Turns: 2, Events: 40, Bytes: 9000, StartBytes: 900}},
		Samples: []HistorySample{{Name: "start", Turns: []SampledTurn{{Turn: 1, Events: 17, Bytes: 3900, RunFirst: true}}},
			{Name: "end", Turns: []SampledTurn{{Turn: 4, Events: 13, Bytes: 3300}}}},
	}
	b, err := json.Marshal(r)
	require.NoError(t, err)
	var back CompactionResults
	require.NoError(t, json.Unmarshal(b, &back), "-compaction-from reads what -compaction-save writes")
	require.Nil(t, back.Config.Progress)
	require.Equal(t, CompactionReport(r), CompactionReport(&back))
	require.Equal(t, back.Samples[0].Turns[0], SampledTurn{Turn: 1, Events: 17, Bytes: 3900, RunFirst: true})
	png, err := CompactionPNG(&back)
	require.NoError(t, err)
	require.True(t, bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")))
}

func TestSpliceCompaction(t *testing.T) {
	section := CompactionBegin + "\nnew\n" + CompactionEnd + "\n"
	require.Equal(t, "# P\n\n"+section, SpliceCompaction("# P\n", section), "appended at the end")
	require.Equal(t, "# P\n\n"+section+"\n## On the local cluster (x)\n", SpliceCompaction("# P\n\n## On the local cluster (x)\n", section),
		"before the local cluster's section")
	old := "# P\n" + CompactionBegin + "\nold\n" + CompactionEnd + "\n## Next\n"
	require.Equal(t, "# P\n"+section+"## Next\n", SpliceCompaction(old, section), "replaced in place")
	require.Equal(t, old, SpliceCompaction(old, ""), "nothing to splice keeps the report")
	require.Equal(t, CompactionBegin+"\nold\n"+CompactionEnd+"\n", CompactionSection(old))
	require.Empty(t, CompactionSection("# P\n"))
}
