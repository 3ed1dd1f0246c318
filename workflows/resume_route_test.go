package workflows_test

// A resume without agent options takes the model route the log records:
// the last request/context {provider, model}, which the published harness
// writes before its model calls.

import (
	"context"
	"errors"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// harnessTurn is a session the published harness wrote, as its JSONL backend
// stores it: the text-turn snapshot of the harness repository
// (examples/acp-agent/tests/snapshots/text-turn/session.jsonl), restored
// (events numbered, placeholders filled) and shortened to a two-delta
// answer. It ends between turns; turn 1's request/context names the route.
const harnessTurn = `{"type":"session","version":0,"id":"ht","createdAt":1783600629539,"cwd":"/work/project","delegationDepth":0}
{"type":"agent/inbox/spliced","seq":0,"time":1783600629539,"data":{"target":"next-turn","start":0,"inserted":[{"content":[{"type":"text","text":"Reply with exactly the word: PONG."}],"source":{"kind":"user"},"role":"user","id":"u1"}]}}
{"type":"turn/start","seq":1,"time":1783600629540,"data":{"turn":1}}
{"type":"agent/inbox/spliced","seq":2,"time":1783600629541,"data":{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}}
{"type":"step/start","seq":3,"time":1783600629542,"data":{"turn":1,"step":1}}
{"type":"user/message","seq":4,"time":1783600629543,"data":{"content":[{"type":"text","text":"Reply with exactly the word: PONG."}],"source":{"kind":"user"},"role":"user","id":"u1"},"surfaceOp":"append"}
{"type":"session/title","seq":5,"time":1783600629544,"data":{"title":"Reply with exactly the word:","messageSeqs":[4],"source":{"kind":"fallback"}}}
{"type":"request/header","seq":6,"time":1783600629545,"data":{"header":{"config":{"provider":"deepseek-official","model":"deepseek-v4-flash"},"system":"You are a coding agent.","tools":[]},"reason":"initial"}}
{"type":"request/context","seq":7,"time":1783600629546,"data":{"provider":"deepseek-official","model":"deepseek-v4-flash"}}
{"type":"assistant/chunk","seq":8,"time":1783600629547,"data":{"turn":1,"step":1,"chunk":{"type":"block-start","index":0,"blockType":"text"}}}
{"type":"assistant/chunk","seq":9,"time":1783600629548,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"P"}}}
{"type":"assistant/chunk","seq":10,"time":1783600629549,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"ONG"}}}
{"type":"assistant/chunk","seq":11,"time":1783600629550,"data":{"turn":1,"step":1,"chunk":{"type":"block-end","index":0,"block":{"type":"text","text":"PONG"}}}}
{"type":"assistant/chunk","seq":12,"time":1783600629551,"data":{"turn":1,"step":1,"chunk":{"type":"finish","reason":{"kind":"stop"}}}}
{"type":"assistant/message","seq":13,"time":1783600629552,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"PONG"}],"source":{"kind":"model","provider":"deepseek-official","model":"deepseek-v4-flash"},"id":"a1"}},"surfaceOp":"append","sourceEventSeqs":[8,9,10,11,12]}
{"type":"step/end","seq":14,"time":1783600629553,"data":{"turn":1,"step":1}}
{"type":"turn/end","seq":15,"time":1783600629554,"data":{"turn":1,"reason":{"kind":"completed"}}}
`

// routeRecorder is a provider that records the route of every request it
// is given and answers with the scripted provider.
type routeRecorder struct {
	next provider.Provider
	mu   sync.Mutex
	seen []string
}

// Stream implements provider.Provider.
func (r *routeRecorder) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	r.mu.Lock()
	r.seen = append(r.seen, req.Provider+"/"+req.Model)
	r.mu.Unlock()
	return r.next.Stream(ctx, req)
}

func (r *routeRecorder) routes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// writeHarnessLog stores log as the session id on st's v0 path (the
// published harness's file name).
func writeHarnessLog(t *testing.T, st *jsonl.Store, id, log string) {
	t.Helper()
	path := filepath.Join(st.Root(), "--work-project--", id, "session.jsonl")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(strings.ReplaceAll(log, `"id":"ht"`, `"id":"`+id+`"`)), 0o600))
}

// routeHarness returns a harness over a session the published harness
// wrote, whose worker offers the scripted provider under the harness's
// provider name, "deepseek-official", recording the routes it is asked for.
func routeHarness(t *testing.T, st *jsonl.Store, id, log string) (*sessiontest.Harness, *routeRecorder) {
	t.Helper()
	writeHarnessLog(t, st, id, log)
	h := sessiontest.NewHarnessOn(t, st).WithID(id)
	// Looped: the response is the same however many assistant messages
	// the harness's conversation holds.
	p, err := scripted.New(scripted.Script{Loop: true, Responses: []scripted.Response{scripted.Text("PONG again").WithChunkSize(4)}})
	require.NoError(t, err)
	rec := &routeRecorder{next: p}
	h.Env.RegisterActivity(sessiontest.AgentActivities(h, provider.Set{"deepseek-official": rec, "scripted": rec}))
	return h, rec
}

// A resume without agentOptions of a harness session whose log holds a
// request/context takes a Followup, and the turn's model call goes to the
// stored provider and model; on both kinds of root (migrated to v3, and
// in place on a v0 root).
func TestResumeTakesTheStoredRoute(t *testing.T) {
	for _, format := range []jsonl.Format{jsonl.FormatV3, jsonl.FormatV0} {
		t.Run(string(format), func(t *testing.T) {
			st, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir(), Compression: jsonl.CompressionNone, Format: format})
			require.NoError(t, err)
			h, rec := routeHarness(t, st, "ht", harnessTurn)
			ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
			fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.Prompt("once more"))
			h.WaitFor(2*time.Second, "the resumed turn ended", turnEndedOrRefused(h, fu))
			disp := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
			h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "ht"})
			require.NoError(t, h.Env.GetWorkflowError())
			ready.OK(t)
			fu.OK(t)
			disp.OK(t)
			require.Equal(t, []string{"deepseek-official/deepseek-v4-flash"}, rec.routes())

			evs := sessiontest.Stored(t, st, "ht")
			require.Equal(t, "turn/end", evs[15].Type, "the harness's events come first")
			require.Equal(t, []string{"session/end-seed", "turn/start"}, sessiontest.Types(evs[16:18]))
			ends := sessiontest.TurnEnds(t, evs)
			require.Equal(t, []string{"completed", "completed"}, sessiontest.ReasonKinds(ends))
			require.Equal(t, []string{"Reply with exactly the word: PONG.", "once more"}, sessiontest.UserTexts(t, evs))
			last := lastAssistant(t, evs)
			require.Contains(t, string(last.Data), `"text":"PONG again"`)
		})
	}
}

// turnEndedOrRefused is a WaitFor condition: the first turn of the
// session ended, or the input fu that was to start it settled without
// starting one (refused), which the test's checks then report.
func turnEndedOrRefused(h *sessiontest.Harness, fu *sessiontest.Result) func() bool {
	ended := h.TurnsEnded(1)
	return func() bool {
		if ended() {
			return true
		}
		s := h.LoopState()
		return fu.Settled() && len(s.Recent) == 0 && len(s.Pending.NextTurn)+len(s.Pending.NextStep) == 0
	}
}

// lastAssistant returns the last assistant/message of evs.
func lastAssistant(t *testing.T, evs []session.Event) session.Event {
	t.Helper()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == wire.TypeAssistantMessage {
			return evs[i]
		}
	}
	t.Fatal("no assistant/message")
	return session.Event{}
}

// The caller's route wins over the stored one; options that name no route
// keep their limits and take the stored route; and the route is carried
// across continue-as-new.
func TestResumeRouteCallerFirstAndCarried(t *testing.T) {
	steps := float64(7)
	for _, c := range []struct {
		name string
		opts *wire.AgentOptions
		want wire.AgentOptions
	}{
		{"given", &wire.AgentOptions{Provider: "scripted", Model: "m1"}, wire.AgentOptions{Provider: "scripted", Model: "m1"}},
		{"limits only", &wire.AgentOptions{MaxSteps: &steps}, wire.AgentOptions{Provider: "deepseek-official", Model: "deepseek-v4-flash", MaxSteps: &steps}},
		{"none", nil, wire.AgentOptions{Provider: "deepseek-official", Model: "deepseek-v4-flash"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := sessiontest.NewStore(t, jsonl.CompressionNone)
			h, rec := routeHarness(t, st, "hc", harnessTurn)
			ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
			fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.Prompt("once more"))
			h.WaitFor(2*time.Second, "the resumed turn ended", turnEndedOrRefused(h, fu))
			h.AtNoWait(3*time.Second, func() { h.Env.SetContinueAsNewSuggested(true) })
			h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "hc", AgentOptions: c.opts})
			ready.OK(t)
			fu.OK(t)
			require.Equal(t, []string{c.want.Provider + "/" + c.want.Model}, rec.routes())
			var can *workflow.ContinueAsNewError
			err := h.Env.GetWorkflowError()
			require.True(t, errors.As(err, &can), "want continue-as-new, got %v", err)
			var state workflows.LiveState
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &state))
			require.Equal(t, &c.want, state.AgentOptions)
		})
	}
}

// A log without request/context gives no route: a Followup to the
// resumed session is refused as before, InvalidArgument, nothing stored.
func TestResumeWithoutAStoredRouteRefusesFollowup(t *testing.T) {
	st := sessiontest.NewStore(t, jsonl.CompressionNone)
	noRoute := strings.Replace(harnessTurn,
		`{"type":"request/context","seq":7,"time":1783600629546,"data":{"provider":"deepseek-official","model":"deepseek-v4-flash"}}`,
		`{"type":"todo/write","seq":7,"time":1783600629546,"data":{"todos":[]}}`, 1)
	require.NotEqual(t, harnessTurn, noRoute)
	h, rec := routeHarness(t, st, "hn", noRoute)
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	fu := h.UpdateAt(2*time.Second, "", wire.UpdateFollowup, sessiontest.Prompt("once more"))
	disp := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: "hn"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	err := fu.Rejection(t)
	require.ErrorContains(t, err, `agent "hn" has no provider/model: set agentOptions.provider and agentOptions.model`)
	require.Equal(t, "InvalidArgument", sessiontest.AppErr(t, err).Type())
	require.Empty(t, rec.routes())
	evs := sessiontest.Stored(t, st, "hn")
	require.Len(t, evs, 17, "the harness's 16 events and the end-seed marker")
	require.Equal(t, wire.TypeEndSeed, evs[16].Type)
}
