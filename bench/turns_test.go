package bench

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/wire"
)

// smokeTurns are the turn measurements of the smoke test: two short
// conversations, two response lengths, and a growth run whose turns add
// enough messages to reach the payload limit in a few turns.
func smokeTurns() TurnsConfig {
	cfg := DefaultTurnsConfig()
	cfg.Sizes = []int{10, 400}
	cfg.Chunks = []int{10, 1000}
	cfg.Turns = 2
	cfg.Warmup = 0
	cfg.SessionTurns = 3
	cfg.GrowBatch = 5000
	cfg.GrowMaxMessages = 100_000
	cfg.Rounds.Sizes = []int{10, 400}
	cfg.Rounds.Parallel = []int{4}
	cfg.Rounds.Rounds = 2
	cfg.Rounds.Warmup = 0
	cfg.Rounds.PerConversation = 1
	return cfg
}

// checkSmokeTurns checks the turn measurements of the smoke test.
func checkSmokeTurns(t *testing.T, tr *TurnResults) {
	t.Helper()
	require.NotNil(t, tr)
	small, ok := tr.Point(PatternSample, 10)
	require.True(t, ok, "the sample ran at 10 messages: %+v", tr.BySize[PatternSample])
	large, ok := tr.Point(PatternSample, 400)
	require.True(t, ok, "the sample ran at 400 messages")
	require.Equal(t, 2, small.Measured)
	require.Equal(t, []string{workflowTasks, SampleModelActivityName}, partNames(small.Parts))
	require.Equal(t, 1, small.Parts[1].Count, "one model activity per turn")
	require.Positive(t, small.Time.Median)
	// 390 more messages of 100 bytes of text travel in the model
	// activity's input: at least 39,000 more bytes per turn.
	require.Greater(t, large.HistoryBytes, small.HistoryBytes+39_000, "the sample's history per turn grows with the conversation")
	long, ok := tr.ChunkPoint(PatternSample, 1000)
	require.True(t, ok)
	require.Greater(t, long.HistoryBytes, small.HistoryBytes+990*4, "the sample's history per turn carries the response")

	fs, ok := tr.Point(PatternSessionflow, 10)
	require.True(t, ok, "sessionflow ran at 10 messages: %+v", tr.BySize[PatternSessionflow])
	fl, ok := tr.Point(PatternSessionflow, 400)
	require.True(t, ok, "sessionflow ran at 400 messages: %+v", tr.BySize[PatternSessionflow])
	require.InEpsilon(t, fs.HistoryBytes, fl.HistoryBytes, 0.05, "sessionflow's history per turn does not grow with the conversation")
	require.Contains(t, partNames(fs.Parts), wire.CallModelActivity)
	fc, ok := tr.ChunkPoint(PatternSessionflow, 1000)
	require.True(t, ok)
	require.InEpsilon(t, fs.HistoryBytes, fc.HistoryBytes, 0.05, "sessionflow's history per turn does not grow with the response")
	require.Equal(t, 3, tr.Long.Turns, tr.Long.Outcome)
	require.Equal(t, 6, tr.Long.Messages)

	g := tr.Grow
	require.Positive(t, g.Turns)
	require.Positive(t, g.FailedAt, "the growth run ends at a limit: %s", g.Outcome)
	require.Greater(t, g.FailedAt, g.Messages)
	require.Contains(t, g.Outcome, "exceeds size limit")

	checkSmokeRounds(t, tr.Rounds)

	charts, err := Charts(tr)
	require.NoError(t, err)
	for _, name := range []string{HistoryChart, TimeChart} {
		require.Contains(t, string(charts[name]), "<svg", name)
		require.Contains(t, string(charts[name]), PatternSample, name)
	}
	report := TurnsReport(tr)
	require.True(t, strings.HasPrefix(report, TurnsBegin))
	require.True(t, strings.HasSuffix(report, TurnsEnd+"\n"))
	require.Contains(t, report, "| agent sample: its run ends at the history or payload limit | turn ")
}

// checkSmokeRounds checks the tool rounds of the smoke test.
func checkSmokeRounds(t *testing.T, rr *RoundResults) {
	t.Helper()
	require.NotNil(t, rr)
	for _, pattern := range []string{PatternSessionflow, PatternSample} {
		for _, k := range []roundKey{{10, 1}, {400, 1}, {10, 4}} {
			p, ok := rr.Point(pattern, k.messages, k.calls)
			require.True(t, ok, "%s ran its rounds at %v: %+v", pattern, k, rr.Points[pattern])
			require.Equal(t, 2, p.Measured)
			require.Positive(t, p.Time.Median)
			require.Greater(t, p.TurnTime.Median, p.Time.Median, "the turn holds the round")
			require.Greater(t, p.TurnBytes, p.HistoryBytes, "the turn holds the round")
			tool := wire.RunToolActivity
			if pattern == PatternSample {
				tool = SampleToolActivityName
			}
			require.Equal(t, []string{workflowTasks, tool}, partNames(p.Parts), "%s at %v", pattern, k)
			require.Equal(t, k.calls, p.Parts[1].Count, "one tool activity per call")
			require.Equal(t, []string{segmentFirstEnd, segmentBetween, segmentDispatch, segmentSecondRun}, partNames(p.Segments), "%s at %v", pattern, k)
		}
	}
	fs, _ := rr.Point(PatternSessionflow, 10, 1)
	fl, _ := rr.Point(PatternSessionflow, 400, 1)
	// The assistant/message with the tool/call it records, then the
	// tool/result with the step's end and the next step's start: two
	// fsyncs of the worker's store in a round; the sample stores nothing.
	require.Equal(t, 2, fs.Syncs, "sessionflow's round stores through the timed filesystem")
	require.Positive(t, fs.SyncTime)
	ss0, _ := rr.Point(PatternSample, 10, 1)
	require.Zero(t, ss0.Syncs)
	require.InEpsilon(t, fs.HistoryBytes, fl.HistoryBytes, 0.05, "sessionflow's history per round does not grow with the conversation")
	ss, _ := rr.Point(PatternSample, 10, 1)
	sl, _ := rr.Point(PatternSample, 400, 1)
	// 390 more messages of 100 bytes of text travel in the second model
	// activity's input.
	require.Greater(t, sl.HistoryBytes, ss.HistoryBytes+39_000, "the sample's history per round grows with the conversation")
	report := RoundsReport(rr)
	require.True(t, strings.HasPrefix(report, RoundsBegin))
	require.Contains(t, report, "| time per round at 10 messages <= 1.0x the sample's | ")
}

func partNames(parts []TurnPart) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p.Name)
	}
	return out
}

func TestSpliceTurnsReplacesOnlyTheTurnSection(t *testing.T) {
	old := "# Performance\n\nintro\n\n" + TurnsBegin + "\nold figures\n" + TurnsEnd + "\n\n## What the workflow profiles showed\n\nnotes\n"
	got := SpliceTurns(old, TurnsBegin+"\nnew figures\n"+TurnsEnd+"\n")
	require.Equal(t, "# Performance\n\nintro\n\n"+TurnsBegin+"\nnew figures\n"+TurnsEnd+"\n\n## What the workflow profiles showed\n\nnotes\n", got)

	// A report without the section gets it before the profiles' notes.
	got = SpliceTurns("# P\n\n## What the workflow profiles showed\n\nnotes\n", "S\n")
	require.Equal(t, "# P\n\nS\n\n## What the workflow profiles showed\n\nnotes\n", got)
	require.Equal(t, "S\n", SpliceTurns("", "S\n"))
}

func TestChartsPlotEveryMeasuredPoint(t *testing.T) {
	tr := &TurnResults{BySize: map[string][]TurnPoint{
		PatternSessionflow: {{Messages: 10, HistoryBytes: 5000, Time: Stats{Median: 12 * time.Millisecond}}, {Messages: 1000, HistoryBytes: 5001, Time: Stats{Median: 14 * time.Millisecond}}},
		PatternSample:      {{Messages: 10, HistoryBytes: 4000, Time: Stats{Median: 8 * time.Millisecond}}, {Messages: 1000, Err: "payload limit"}},
	}}
	require.Len(t, chartSeries(tr, PatternSessionflow, func(p TurnPoint) float64 { return float64(p.HistoryBytes) }), 2)
	require.Len(t, chartSeries(tr, PatternSample, func(p TurnPoint) float64 { return float64(p.HistoryBytes) }), 1, "a failed point is not drawn")
	charts, err := Charts(tr)
	require.NoError(t, err)
	require.Contains(t, string(charts[TimeChart]), PatternSessionflow)
	_, err = Charts(&TurnResults{})
	require.ErrorContains(t, err, "no pattern has points to draw")
}

func TestConversation(t *testing.T) {
	c := Conversation(3, 40)
	require.Len(t, c, 3)
	require.Equal(t, []string{provider.RoleUser, provider.RoleAssistant, provider.RoleUser}, []string{c[0].Role, c[1].Role, c[2].Role})
	require.Len(t, c[2].Content[0].Text, 40)
	require.True(t, strings.HasPrefix(c[2].Content[0].Text, "message 2: "))
}

func TestWriteConversationLogStoresCompletedTurns(t *testing.T) {
	ctx := context.Background()
	st, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir(), Compression: jsonl.CompressionNone})
	require.NoError(t, err)
	next, size, err := WriteConversationLog(ctx, st, "conv", 5, 30, "m")
	require.NoError(t, err)
	// Two whole turns of six events, then a turn holding only the fifth
	// message.
	require.Equal(t, int64(15), next)
	require.Positive(t, size)

	h, err := st.Open(ctx, "conv", jsonl.AccessRead, jsonl.OpenOptions{})
	require.NoError(t, err)
	defer func() { require.NoError(t, h.Close(ctx)) }()
	evs, err := h.Read(ctx, 0, -1)
	require.NoError(t, err)
	var types []string
	var texts []string
	for _, ev := range evs {
		types = append(types, ev.Type)
		var d struct {
			Content []provider.Block `json:"content"`
			Message struct {
				Content []provider.Block `json:"content"`
			} `json:"message"`
		}
		require.NoError(t, json.Unmarshal(ev.Data, &d))
		for _, b := range append(d.Content, d.Message.Content...) {
			texts = append(texts, b.Text)
		}
	}
	turn := []string{wire.TypeTurnStart, wire.TypeUserMessage, wire.TypeStepStart, wire.TypeAssistantMessage, wire.TypeStepEnd, wire.TypeTurnEnd}
	want := append(append(append([]string{}, turn...), turn...), wire.TypeTurnStart, wire.TypeUserMessage, wire.TypeTurnEnd)
	require.Equal(t, want, types)
	var conv []string
	for _, m := range Conversation(5, 30) {
		conv = append(conv, m.Content[0].Text)
	}
	require.Equal(t, conv, texts, "the log holds the messages of Conversation, in order")
}

func TestTurnPartsTimeActivitiesAndWorkflowTasks(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) *timestamppb.Timestamp {
		return timestamppb.New(t0.Add(time.Duration(ms) * time.Millisecond))
	}
	evs := []*historypb.HistoryEvent{
		{EventId: 1, EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, EventTime: at(0)},
		{EventId: 3, EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, EventTime: at(3),
			Attributes: &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{ScheduledEventId: 1}}},
		{EventId: 4, EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, EventTime: at(3),
			Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{ActivityType: &commonpb.ActivityType{Name: "CallModel"}}}},
		{EventId: 6, EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, EventTime: at(13),
			Attributes: &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{ScheduledEventId: 4}}},
		{EventId: 7, EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, EventTime: at(13)},
		{EventId: 9, EventType: enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, EventTime: at(15),
			Attributes: &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{ScheduledEventId: 7}}},
	}
	got := turnParts(evs)
	require.Equal(t, []TurnPart{{Name: workflowTasks, Count: 2, Median: 5 * time.Millisecond}, {Name: "CallModel", Count: 1, Median: 10 * time.Millisecond}}, got)

	m := medianParts([][]TurnPart{got, {{Name: "CallModel", Count: 1, Median: 30 * time.Millisecond}}, {{Name: "CallModel", Count: 1, Median: 20 * time.Millisecond}, {Name: workflowTasks, Count: 2, Median: 7 * time.Millisecond}}})
	require.Equal(t, []TurnPart{{Name: workflowTasks, Count: 2, Median: 5 * time.Millisecond}, {Name: "CallModel", Count: 1, Median: 20 * time.Millisecond}}, m,
		"a part missing from a turn counts as zero there")
}
