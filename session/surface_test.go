package session

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// The expectations below are the published harness's: each case was run
// through foldSurface of @deepseek-ai/dsh-session 0.1.0-rc.8, whose verdict
// (accepted, with these nodes and replacements, or refused) is in the case.

// su is a user/message at seq with a surface operation (nil for none).
func su(seq int64, op *SurfaceOp, sources ...int64) Event {
	e := mk(wire.TypeUserMessage, seq, fmt.Sprintf(`{"id":"u%d","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}`, seq))
	e.SurfaceOp = op
	if sources != nil {
		e.SourceEventSeqs = sources
	}
	return e
}

// str is a tool/result at seq whose result text and isError vary.
func str(seq int64, text string, isError bool, op *SurfaceOp, sources ...int64) Event {
	e := mk(wire.TypeToolResult, seq, fmt.Sprintf(`{"turn":1,"step":1,"message":{"id":"m","role":"user","source":{"kind":"tool","callId":"c"},`+
		`"content":[{"type":"tool-result","toolCallId":"c","isError":%t,"content":[{"type":"text","text":%q}]}]}}`, isError, text))
	e.SurfaceOp = op
	if sources != nil {
		e.SourceEventSeqs = sources
	}
	return e
}

func rep(start, end int64) *SurfaceOp {
	return &SurfaceOp{Op: SurfaceReplace, StartSeq: start, EndSeq: end, Spelling: SpellingV0}
}

func turnStart(seq int64) Event { return mk(wire.TypeTurnStart, seq, `{"turn":1}`) }

func TestFoldSurfaceAccepts(t *testing.T) {
	asst := mk(wire.TypeAssistantMessage, 1, `{"turn":1,"step":1,"message":{"id":"a","role":"assistant","source":{"kind":"model","provider":"p","model":"m"},"content":[]}}`)
	asst.SurfaceOp, asst.SourceEventSeqs = AppendOp(), []int64{}
	sys := mk(wire.TypeSystemMessage, 1, `{"turn":1,"step":1,"message":"You are a coding agent."}`)
	sysAppend := sys
	sysAppend.SurfaceOp = AppendOp()
	for _, c := range []struct {
		name   string
		events []Event
		nodes  []int64
		reps   []SurfaceReplacement
	}{
		{"appends, an event without surface between", []Event{su(0, AppendOp()), turnStart(1), su(2, AppendOp())}, []int64{0, 2}, nil},
		{"a replace", []Event{su(0, AppendOp()), su(1, AppendOp()), su(2, AppendOp()), su(3, rep(0, 1), 0, 1)},
			[]int64{3, 2}, []SurfaceReplacement{{Seq: 3, Start: 0, End: 1, Shadowed: []int64{0, 1}}}},
		{"a replace whose start follows its end by seq, after a replace", []Event{su(0, AppendOp()), su(1, AppendOp()), su(2, AppendOp()),
			su(3, rep(0, 1), 0, 1), su(4, rep(3, 2), 3, 2)},
			[]int64{4}, []SurfaceReplacement{{Seq: 3, Start: 0, End: 1, Shadowed: []int64{0, 1}}, {Seq: 4, Start: 3, End: 2, Shadowed: []int64{3, 2}}}},
		{"a replace citing more than it replaces", []Event{su(0, AppendOp()), su(1, AppendOp()), su(2, rep(1, 1), 0, 1)},
			[]int64{0, 2}, []SurfaceReplacement{{Seq: 2, Start: 1, End: 1, Shadowed: []int64{1}}}},
		{"an assistant/message citing nothing", []Event{su(0, AppendOp()), asst}, []int64{0, 1}, nil},
		{"a tool/result rewriting a result's content", []Event{str(0, "A", false, AppendOp()), str(1, "B", false, rep(0, 0), 0)},
			[]int64{1}, []SurfaceReplacement{{Seq: 1, Start: 0, End: 0, Shadowed: []int64{0}}}},
		{"a user/message replacing a tool/result", []Event{str(0, "A", false, AppendOp()), su(1, rep(0, 0), 0)},
			[]int64{1}, []SurfaceReplacement{{Seq: 1, Start: 0, End: 0, Shadowed: []int64{0}}}},
		// sessionflow's own system/message: no surfaceOp is required on it.
		{"a system/message without surfaceOp", []Event{su(0, AppendOp()), sys}, []int64{0}, nil},
		{"a system/message appended", []Event{su(0, AppendOp()), sysAppend}, []int64{0, 1}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			fold, err := FoldSurface(c.events)
			require.NoError(t, err)
			assert.Equal(t, c.nodes, fold.Nodes)
			assert.Equal(t, c.reps, fold.Replacements)
		})
	}
}

func TestFoldSurfaceRefuses(t *testing.T) {
	withOp := func(e Event, op *SurfaceOp, sources ...int64) Event {
		e.SurfaceOp, e.SourceEventSeqs = op, sources
		return e
	}
	for _, c := range []struct {
		name   string
		events []Event
		want   string
	}{
		{"a replace whose start is not a node", []Event{su(0, AppendOp()), turnStart(1), su(2, rep(1, 1), 1)},
			"surface: replace at seq 2: start seq 1 is not a current surface node"},
		{"a replace whose end is not a node", []Event{su(0, AppendOp()), turnStart(1), su(2, rep(0, 1), 0, 1)},
			"surface: replace at seq 2: end seq 1 is not a current surface node"},
		{"a replace whose start comes after its end", []Event{su(0, AppendOp()), su(1, AppendOp()), su(2, AppendOp()), su(3, rep(1, 0), 0, 1)},
			"surface: replace at seq 3: start seq 1 (node 1) comes after end seq 0 (node 0)"},
		{"a replace not citing a replaced node", []Event{su(0, AppendOp()), su(1, AppendOp()), su(2, rep(0, 1), 0)},
			"surface: replace at seq 2: sourceEventSeqs must cite every replaced node; missing [1]"},
		{"a user/message without surfaceOp", []Event{su(0, nil)},
			`surface: "user/message" event at seq 0 lacks the surfaceOp its type requires`},
		{"surfaceOp on a turn/start", []Event{withOp(turnStart(0), AppendOp())},
			`surface: "turn/start" event at seq 0 is not surface-eligible and cannot carry surfaceOp`},
		{"sourceEventSeqs on a turn/start", []Event{su(0, AppendOp()), withOp(turnStart(1), nil, 0)},
			`surface: "turn/start" event at seq 1 is not surface-eligible and cannot carry sourceEventSeqs`},
		{"empty sourceEventSeqs on a user/message", []Event{su(0, AppendOp()), su(1, AppendOp(), []int64{}...)},
			`surface: sourceEventSeqs of the "user/message" event at seq 1 is empty (only assistant/message may cite nothing)`},
		{"a repeated source", []Event{su(0, AppendOp()), su(1, AppendOp(), 0, 0)},
			"surface: sourceEventSeqs of the event at seq 1 cites a seq twice"},
		{"a source that is not earlier", []Event{su(0, AppendOp()), su(1, AppendOp(), 1)},
			"surface: sourceEventSeqs of the event at seq 1 cites 1, which is not an earlier event"},
		{"a seq gap", []Event{su(0, AppendOp()), su(2, AppendOp())},
			"surface: event seq 2 is not contiguous; expected 1"},
		{"a tool/result rewrite changing isError", []Event{str(0, "A", false, AppendOp()), str(1, "B", true, rep(0, 0), 0)},
			"surface: tool/result replacement at seq 1 may change only the content of the result it replaces (0)"},
		{"a tool/result replacing two nodes", []Event{str(0, "A", false, AppendOp()), str(1, "A", false, AppendOp()), str(2, "B", false, rep(0, 1), 0, 1)},
			"surface: tool/result replacement at seq 2 replaces 2 nodes; it must replace exactly one"},
		{"a tool/result replacing a user/message", []Event{su(0, AppendOp()), str(1, "B", false, rep(0, 0), 0)},
			"surface: tool/result replacement at seq 1 replaces node 0, which is not a tool/result"},
		{"an operation that is neither append nor replace", []Event{su(0, &SurfaceOp{Op: "prepend"})},
			`surface: "user/message" event at seq 0 carries an invalid surfaceOp "prepend"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := FoldSurface(c.events)
			require.Error(t, err)
			assert.Equal(t, c.want, err.Error())
		})
	}
}

// TestFoldSurfaceEmptySourcesOnUser: an empty, non-nil sourceEventSeqs is
// present (and refused on a user/message); nil is absent.
func TestFoldSurfaceEmptySourcesOnUser(t *testing.T) {
	e := su(0, AppendOp())
	e.SourceEventSeqs = []int64{}
	_, err := FoldSurface([]Event{e})
	require.EqualError(t, err, `surface: sourceEventSeqs of the "user/message" event at seq 0 is empty (only assistant/message may cite nothing)`)
	e.SourceEventSeqs = nil
	_, err = FoldSurface([]Event{e})
	require.NoError(t, err)
}

// TestToolResultRewriteComparesValues: the data a tool/result rewrite must
// keep is compared as JavaScript compares JSON values: key order and number
// spellings do not matter, values do.
func TestToolResultRewriteComparesValues(t *testing.T) {
	orig := mk(wire.TypeToolResult, 0, `{"turn":1,"step":1,"message":{"id":"m","role":"user","source":{"kind":"tool","callId":"c"},`+
		`"content":[{"type":"tool-result","toolCallId":"c","isError":false,"content":[{"type":"text","text":"A"}]}]},"meta":{"n":10}}`)
	orig.SurfaceOp = AppendOp()
	same := mk(wire.TypeToolResult, 1, `{"meta":{"n":1e1},"step":1.0,"turn":1,"message":{"role":"user","id":"m","source":{"callId":"c","kind":"tool"},`+
		`"content":[{"content":[],"isError":false,"toolCallId":"c","type":"tool-result"}]}}`)
	same.SurfaceOp, same.SourceEventSeqs = rep(0, 0), []int64{0}
	_, err := FoldSurface([]Event{orig, same})
	require.NoError(t, err)

	other := same
	other.Data = json.RawMessage(`{"meta":{"n":11},"step":1,"turn":1,"message":{"role":"user","id":"m","source":{"callId":"c","kind":"tool"},` +
		`"content":[{"content":[],"isError":false,"toolCallId":"c","type":"tool-result"}]}}`)
	_, err = FoldSurface([]Event{orig, other})
	require.EqualError(t, err, "surface: tool/result replacement at seq 1 may change only the content of the result it replaces (0)")
}

// TestSurfaceNextLeavesStateOnRefusal: a refused event changes nothing; the
// right event is then accepted.
func TestSurfaceNextLeavesStateOnRefusal(t *testing.T) {
	var s Surface
	require.NoError(t, s.Next(su(0, AppendOp())))
	require.NoError(t, s.Next(str(1, "A", false, AppendOp())))
	require.NoError(t, s.Next(su(2, AppendOp())))
	for _, bad := range []Event{
		su(4, AppendOp()),                                              // not the next seq
		su(3, rep(0, 2), 0, 1),                                         // misses node 2
		str(3, "B", true, rep(1, 1), 1),                                // changes isError
		str(3, "B", false, rep(0, 1), 0, 1),                            // two nodes
		withSources(su(3, AppendOp()), 0, 0),                           // a repeated source
		withSources(turnStart(3), 0),                                   // sources without surface
		su(3, &SurfaceOp{Op: "prepend"}),                               // no such operation
		su(3, &SurfaceOp{Op: SurfaceReplace, StartSeq: -1, EndSeq: 0}), // not a seq
	} {
		require.Error(t, s.Check(bad), "%+v", bad)
		require.Error(t, s.Next(bad), "%+v", bad)
		require.Equal(t, []int64{0, 1, 2}, s.Nodes())
		require.Equal(t, int64(3), s.NextSeq())
		require.Equal(t, int64(0), s.Generation())
	}
	require.NoError(t, s.Next(str(3, "B", false, rep(1, 1), 1)))
	require.Equal(t, []int64{0, 3, 2}, s.Nodes())
	require.Equal(t, int64(1), s.Generation())
	// The rewritten result can itself be rewritten; the one it replaced cannot.
	require.Error(t, s.Check(str(4, "C", false, rep(1, 1), 1)))
	require.NoError(t, s.Next(str(4, "C", false, rep(3, 3), 3)))
	require.Equal(t, []int64{0, 4, 2}, s.Nodes())
}

func withSources(e Event, sources ...int64) Event {
	e.SourceEventSeqs = sources
	return e
}
