package harness

// Sessions that compact, run through the workflows with the real agent
// activities and judged with the published harness's own code: its load,
// its session and compaction invariants, its surface fold and the
// conversation it derives, its token meter's prices and its tool-pairing
// check (judge.mjs, compaction.mjs).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/testsuite/testdeadline"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// compactModel is the model of the compacting sessions. Every call is
// answered by a scripted provider (provider/scripted) built for it, with
// the context window window (0: none), so the script refuses a request
// over the window with CONTEXT_WINDOW_EXCEEDED and answers a summarisation
// (Purpose "compaction") with its default "Summary of K messages.". An
// ordinary request whose last message is a user text starting with a tool
// tag, "qNN [list_dir PATH]" or "qNN [read_file PATH]", gets a call of that
// tool (id call-qNN); any other gets answer. With stall set, summarisation
// calls block until their context is done or the test ends. With
// hideWindow set, the model refuses requests over its window but does not
// report it (ContextWindow is 0), as a provider whose window the agent does
// not know.
type compactModel struct {
	window     int64
	hideWindow bool
	answer     string
	stall      bool

	mu        sync.Mutex
	maxTokens int // the largest estimate of an ordinary request answered
	refused   int // ordinary requests refused as over the window
	summaries int // summarisation calls answered or stalled
	stalled   int
	release   chan struct{}
	running   sync.WaitGroup
}

// toolTag is the tag of a prompt that asks for a tool call.
var toolTag = regexp.MustCompile(`^(q\d+) \[(list_dir|read_file) ([^\]]*)\]`)

// ContextWindow reports the model's window to the agent, as the scripted
// provider does.
func (m *compactModel) ContextWindow() int64 {
	if m.hideWindow {
		return 0
	}
	return m.window
}

func (m *compactModel) response(req provider.Request) scripted.Response {
	if n := len(req.Messages); n > 0 {
		last := req.Messages[n-1]
		if last.Role == provider.RoleUser && len(last.Content) == 1 && last.Content[0].Type == provider.BlockText {
			if g := toolTag.FindStringSubmatch(last.Content[0].Text); g != nil {
				args, _ := json.Marshal(map[string]string{"path": g[3]})
				return scripted.ToolCall("call-"+g[1], g[2], string(args))
			}
		}
	}
	return scripted.Text(m.answer)
}

// Stream implements provider.Provider.
func (m *compactModel) Stream(ctx context.Context, req provider.Request) iter.Seq2[provider.Chunk, error] {
	n := provider.EstimateRequest(req)
	summary := req.Purpose == provider.PurposeCompaction
	over := m.window > 0 && int64(n) > m.window
	m.mu.Lock()
	switch {
	case summary && !over:
		m.summaries++
	case over && !summary:
		m.refused++
	case !summary:
		m.maxTokens = max(m.maxTokens, n)
	}
	stall := summary && m.stall && !over
	if stall {
		m.stalled++
		m.running.Add(1)
	}
	m.mu.Unlock()
	if stall {
		return func(yield func(provider.Chunk, error) bool) {
			defer m.running.Done()
			select {
			case <-ctx.Done():
				yield(provider.Chunk{}, ctx.Err())
			case <-m.release:
				yield(provider.Chunk{}, &provider.Error{Message: "the test ended"})
			}
		}
	}
	p, err := scripted.New(scripted.Script{Loop: true, ContextWindow: m.window, Responses: []scripted.Response{m.response(req)}})
	if err != nil {
		return func(yield func(provider.Chunk, error) bool) { yield(provider.Chunk{}, err) }
	}
	return p.Stream(ctx, req)
}

func (m *compactModel) stats() (maxTokens, refused, summaries int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.maxTokens, m.refused, m.summaries
}

// stalling is a WaitFor condition: a summarisation call stalls.
func (m *compactModel) stalling() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stalled > 0
}

// releaseAtEnd makes the stalled calls return when the test ends, and
// waits for them (before the test's directories are removed).
func (m *compactModel) releaseAtEnd(t *testing.T) {
	m.release = make(chan struct{})
	t.Cleanup(func() {
		close(m.release)
		m.running.Wait()
	})
}

// sessionStep is one step of a compacting session: a Followup with
// prompt, or the Compact update with the command id compact. cancel
// cancels the prompt's turn once a summarisation call stalls.
type sessionStep struct {
	prompt  string
	compact string
	cancel  bool
}

// sessionRun is what the updates of a session returned.
type sessionRun struct {
	compacts []wire.CompactResult
	cancels  []wire.CancelResult
}

// runSteps sends the steps one virtual second apart from 2 s, each after
// the previous settled (a Followup's turn ended), disposes the session,
// runs the workflow with start and requires every update to succeed.
func runSteps(t *testing.T, h *sessiontest.Harness, m *compactModel, steps []sessionStep, start func()) sessionRun {
	t.Helper()
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	var fus, compacts, cancels []*sessiontest.Result
	turns := 0
	for i, s := range steps {
		at := time.Duration(i+2) * time.Second
		if s.compact != "" {
			compacts = append(compacts, h.UpdateAt(at, "", wire.UpdateCompact, wire.CompactRequest{CommandID: s.compact}))
			continue
		}
		turns++
		fus = append(fus, h.UpdateAt(at, "", wire.UpdateFollowup, sessiontest.Prompt(s.prompt)))
		if s.cancel {
			h.WaitFor(at, "a summarisation call stalls", m.stalling)
			cancels = append(cancels, h.UpdateAt(at, "", wire.UpdateCancel, wire.CancelRequest{Cause: "user"}))
		}
		h.WaitFor(at, fmt.Sprintf("turn %d ended", turns), h.TurnsEnded(turns))
	}
	disp := h.UpdateAt(time.Duration(len(steps)+2)*time.Second, "", wire.UpdateDispose)
	start()
	if err := h.Env.GetWorkflowError(); err != nil {
		t.Fatalf("the session's workflow: %v", err)
	}
	ready.OK(t)
	for _, fu := range fus {
		fu.OK(t)
	}
	disp.OK(t)
	var run sessionRun
	for _, c := range compacts {
		var r wire.CompactResult
		c.Decode(t, &r)
		run.compacts = append(run.compacts, r)
	}
	for _, c := range cancels {
		var r wire.CancelResult
		c.Decode(t, &r)
		run.cancels = append(run.cancels, r)
	}
	return run
}

// compactedLog is a session log to judge: a session of id on a format v0
// root (compression none).
type compactedLog struct {
	name, root, id string
}

// v0Store opens a format v0 root without compression, as the harness
// writes.
func v0Store(t *testing.T, root string) *jsonl.Store {
	t.Helper()
	st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: jsonl.CompressionNone, Format: jsonl.FormatV0})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// workspace is a working directory for the built-in tools: a few files,
// one of them (big.txt) over the tool-result pruning budget of
// pruningActivities.
func workspace(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"a.txt":     "alpha\n",
		"notes.txt": strings.Repeat("a note about the project, line by line\n", 20),
		"big.txt":   strings.Repeat("0123456789 abcdefghij ", 140),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// compactingHarness is a harness over a format v0 root whose agent
// activities answer with m (under the provider names names, "scripted"
// when none) and prune tool results over 2000 code points (keeping 600 and
// 200). wrap, when set, registers its own activities over the agent's.
func compactingHarness(t *testing.T, root, id string, m *compactModel, wrap func(*sessiontest.Harness, *agent.Activities), names ...string) *sessiontest.Harness {
	t.Helper()
	h := sessiontest.NewHarnessOn(t, v0Store(t, root)).WithID(id)
	set := provider.Set{"scripted": m}
	for _, n := range names {
		set[n] = m
	}
	acts := sessiontest.AgentActivities(h, set)
	acts.Compaction = agent.CompactionSettings{PruneChars: 2000, PruneHeadChars: 600, PruneTailChars: 200}
	h.Env.RegisterActivity(acts)
	if wrap != nil {
		wrap(h, acts)
	}
	return h
}

// words is a text of about n estimated tokens (4 characters each).
func words(n int) string {
	return strings.Repeat("word ", n*4/5)
}

// compactionRead is compaction.mjs's reading of one log.
type compactionRead struct {
	Messages  []json.RawMessage `json:"messages"`
	Summaries []struct {
		Seq           int64   `json:"seq"`
		Surface       []int64 `json:"surface"`
		Prices        []int   `json:"prices"`
		BalancedAfter bool    `json:"balancedAfter"`
	} `json:"summaries"`
	Prunes []struct {
		Seq   int64 `json:"seq"`
		Price int   `json:"price"`
	} `json:"prunes"`
	// LiveError is what the harness's invariants throw when the log's
	// last run is appended to a live session (compaction.mjs).
	LiveError     string `json:"liveError"`
	LiveErrorName string `json:"liveErrorName"`
	Error         string `json:"error"`
	ErrorName     string `json:"errorName"`
}

// bracket is one compaction bracket of a log: its events' seqs (-1 for
// none), its owner, its command and its outcome.
type bracket struct {
	id                         string
	turn                       *int64
	command                    string
	start, summary, checkpoint int64
	end                        int64
	err                        string
	before                     string // the type of the event before its start
	shadowed                   []int64
	shadowedTokens             int
	stale                      bool // left open before an end-seed marker
}

// judgedCompaction is one judged log.
type judgedCompaction struct {
	events   []loadedEvent
	brackets []bracket
	prunes   int
	verdict  nodeVerdict
}

// judgeCompactions judges each log (a copy of its root) with the package's
// load, fold and invariants (judge.mjs) and sessionflow's read beside them
// (they must agree), reads its compactions with compaction.mjs, and checks
// every log: the invariants pass, the conversation the harness derives
// from the log is the one agent.Conversation derives from the same events
// (roles and blocks, in order), and each compaction record is the
// harness's (checkCompactions). It returns each log's brackets.
func judgeCompactions(t *testing.T, logs []compactedLog) []judgedCompaction {
	t.Helper()
	var inputs []judgeInput
	for _, l := range logs {
		inputs = append(inputs, judgeInput{Root: copyOf(t, l.root, ""), Compression: "none", ID: l.id})
	}
	gv, nv := judgeBoth(t, testdeadline.Context(t, 3*time.Minute), inputs)
	var lines []map[string]any
	for i, l := range logs {
		n := nv[i]
		if !n.Accepted {
			t.Fatalf("%s: the package refuses the log: %s: %s", l.name, n.ErrorName, n.Error)
		}
		if d := compareVerdicts(n, gv[i]); d != "" {
			t.Fatalf("%s: sessionflow's read and the package's load disagree: %s", l.name, d)
		}
		if n.InvariantError != "" {
			t.Fatalf("%s: the harness's invariants refuse the log: %s: %s", l.name, n.InvariantErrorName, n.InvariantError)
		}
		lines = append(lines, map[string]any{"meta": n.Meta, "events": n.Events})
	}
	reads := readCompactions(t, lines)
	out := make([]judgedCompaction, len(logs))
	for i, l := range logs {
		r := reads[i]
		if r.Error != "" {
			t.Fatalf("%s: compaction.mjs: %s: %s", l.name, r.ErrorName, r.Error)
		}
		if r.LiveError != "" {
			t.Fatalf("%s: the harness's invariants refuse the log's last run appended live: %s: %s", l.name, r.LiveErrorName, r.LiveError)
		}
		var events []loadedEvent
		for _, raw := range nv[i].Events {
			var e loadedEvent
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			events = append(events, e)
		}
		checkConversation(t, l.name, gv[i].Events, r)
		bs, prunes := checkCompactions(t, l.name, events, nv[i], r)
		out[i] = judgedCompaction{events: events, brackets: bs, prunes: prunes, verdict: nv[i]}
	}
	return out
}

// readCompactions runs compaction.mjs over loaded logs ({meta, events}).
func readCompactions(t *testing.T, logs []map[string]any) []compactionRead {
	t.Helper()
	var in strings.Builder
	enc := json.NewEncoder(&in)
	for _, l := range logs {
		if err := enc.Encode(l); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]compactionRead, len(logs))
	var stdout []json.RawMessage
	runLines(t, "compaction.mjs", in.String(), &stdout)
	if len(stdout) != len(logs) {
		t.Fatalf("compaction.mjs read %d logs, want %d", len(stdout), len(logs))
	}
	for i, raw := range stdout {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// runLines runs a line-oriented script of testdata/harness with stdin and
// returns the JSON values of its output, one a line.
func runLines(t *testing.T, script, stdin string, out *[]json.RawMessage) {
	t.Helper()
	ctx := testdeadline.Context(t, 3*time.Minute)
	cmd := exec.CommandContext(ctx, nodeBinary(t), script)
	cmd.Dir = harnessDir
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", script, err, stderr.String())
	}
	dec := json.NewDecoder(&stdout)
	for dec.More() {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s output: %v\nstderr:\n%s", script, err, stderr.String())
		}
		*out = append(*out, v)
	}
}

// checkConversation: the messages the harness derives from the log
// (Session.deriveMessages over its surface fold) are, in order, those
// agent.Conversation derives from the events sessionflow reads, role for
// role and block for block.
func checkConversation(t *testing.T, name string, events []session.Event, r compactionRead) {
	t.Helper()
	conv, err := agent.Conversation(events)
	if err != nil {
		t.Fatalf("%s: agent.Conversation: %v", name, err)
	}
	var want []string
	for _, raw := range r.Messages {
		var m struct {
			Role    string        `json:"role"`
			Content []storedBlock `json:"content"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		blocks, err := providerBlocks(m.Content)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, _ := json.Marshal(provider.Message{Role: m.Role, Content: blocks})
		want = append(want, string(b))
	}
	var got []string
	for _, m := range conv {
		b, _ := json.Marshal(m)
		got = append(got, string(b))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: agent.Conversation derives %d messages\n%s\nthe harness derives %d\n%s",
			name, len(got), abbrev(strings.Join(got, "\n")), len(want), abbrev(strings.Join(want, "\n")))
	}
}

// compactionData is the data of a compaction event.
type compactionData struct {
	CompactionID    string  `json:"compactionId"`
	SourceCommandID string  `json:"sourceCommandId"`
	Turn            *int64  `json:"turn"`
	Error           *string `json:"error"`
	ShadowedRange   *struct {
		Start int64 `json:"start"`
		End   int64 `json:"end"`
	} `json:"shadowedRange"`
	ShadowedSeqs       []int64 `json:"shadowedSeqs"`
	ShadowedTokenCount int     `json:"shadowedTokenCount"`
	Source             *struct {
		Kind            string `json:"kind"`
		Plugin          string `json:"plugin"`
		CompactionID    string `json:"compactionId"`
		SourceCommandID string `json:"sourceCommandId"`
	} `json:"source"`
}

// surfaceReplace is a replace surfaceOp in the package's spelling.
type surfaceReplace struct {
	Op    string `json:"op"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
}

// checkCompactions checks the compaction records of a loaded log against
// the harness: each summary's checkpoint follows it, replaces its
// shadowedRange and cites the bracket's start, the summary and every
// shadowed node, as the harness's checkpoint does; the package's fold of
// the checkpoint shadows the summary's shadowedSeqs; those are a head of
// the surface the compaction read, it keeps at least one node, and the cut
// after them is tool-pairing balanced (the harness's own check); the
// summary's shadowedTokenCount is the token meter's price of those nodes;
// each compaction/prune is followed by the tool/result that replaces the
// one it names, and prices it as the meter does. It returns the brackets
// and the number of prunes.
func checkCompactions(t *testing.T, name string, events []loadedEvent, v nodeVerdict, r compactionRead) ([]bracket, int) {
	t.Helper()
	fail := func(seq int64, format string, args ...any) {
		t.Helper()
		t.Fatalf("%s: seq %d: %s", name, seq, fmt.Sprintf(format, args...))
	}
	replacements := map[int64][]int64{}
	for _, rp := range v.Replacements {
		replacements[rp.Seq] = rp.Shadowed
	}
	summaries := map[int64]int{}
	for i, s := range r.Summaries {
		summaries[s.Seq] = i
	}
	prunePrices := map[int64]int{}
	for _, p := range r.Prunes {
		prunePrices[p.Seq] = p.Price
	}
	var out []bracket
	var open *bracket
	prunes := 0
	for i, e := range events {
		var d compactionData
		switch e.Type {
		case wire.TypeCompactionStart, wire.TypeCompactionSummary, wire.TypeCompactionEnd, wire.TypeCompactionPrune, wire.TypeUserMessage:
			if err := json.Unmarshal(e.Data, &d); err != nil {
				fail(e.Seq, "%v", err)
			}
		}
		switch e.Type {
		case wire.TypeCompactionStart:
			if open != nil {
				fail(e.Seq, "a compaction/start inside the bracket of seq %d", open.start)
			}
			before := ""
			if i > 0 {
				before = events[i-1].Type
			}
			open = &bracket{id: d.CompactionID, turn: d.Turn, command: d.SourceCommandID, start: e.Seq, summary: -1, checkpoint: -1, end: -1, before: before}
		case wire.TypeCompactionSummary:
			if open == nil || d.CompactionID != open.id || d.SourceCommandID != open.command {
				fail(e.Seq, "a summary outside its bracket")
			}
			open.summary, open.shadowed, open.shadowedTokens = e.Seq, d.ShadowedSeqs, d.ShadowedTokenCount
			k, ok := summaries[e.Seq]
			if !ok {
				fail(e.Seq, "compaction.mjs did not read the summary")
			}
			s := r.Summaries[k]
			price := 0
			for _, p := range s.Prices {
				price += p
			}
			if d.ShadowedTokenCount != price {
				fail(e.Seq, "shadowedTokenCount %d, the token meter prices the shadowed nodes %v at %v (%d)", d.ShadowedTokenCount, d.ShadowedSeqs, s.Prices, price)
			}
			if len(d.ShadowedSeqs) == 0 || len(d.ShadowedSeqs) >= len(s.Surface) || !slices.Equal(d.ShadowedSeqs, s.Surface[:len(d.ShadowedSeqs)]) {
				fail(e.Seq, "shadowedSeqs %v are not a head of the surface %v the compaction read, short of its last node", d.ShadowedSeqs, s.Surface)
			}
			if !s.BalancedAfter {
				fail(e.Seq, "the cut after the shadowed nodes %v splits a tool call from its result (the harness's toolPairingBalancedAfter)", d.ShadowedSeqs)
			}
			if d.ShadowedRange == nil || d.ShadowedRange.Start != d.ShadowedSeqs[0] || d.ShadowedRange.End != d.ShadowedSeqs[len(d.ShadowedSeqs)-1] {
				fail(e.Seq, "shadowedRange %+v does not bound shadowedSeqs %v", d.ShadowedRange, d.ShadowedSeqs)
			}
		case wire.TypeUserMessage:
			if d.Source == nil || d.Source.Kind != "plugin" || d.Source.Plugin != "compact" {
				continue
			}
			if open == nil || open.summary != e.Seq-1 || open.checkpoint >= 0 {
				fail(e.Seq, "a checkpoint that does not follow its bracket's summary")
			}
			if d.Source.CompactionID != open.id || d.Source.SourceCommandID != open.command {
				fail(e.Seq, "the checkpoint's source %+v, want compaction %s (command %q)", *d.Source, open.id, open.command)
			}
			var op surfaceReplace
			if err := json.Unmarshal(e.SurfaceOp, &op); err != nil || op != (surfaceReplace{Op: "replace", Start: open.shadowed[0], End: open.shadowed[len(open.shadowed)-1]}) {
				fail(e.Seq, "the checkpoint's surfaceOp %s does not replace the shadowedRange", e.SurfaceOp)
			}
			want := append([]int64{open.start, open.summary}, open.shadowed...)
			if !slices.Equal(e.SourceEventSeqs, want) {
				fail(e.Seq, "the checkpoint cites %v, want the start, the summary and the shadowed nodes %v", e.SourceEventSeqs, want)
			}
			if got := replacements[e.Seq]; !slices.Equal(got, open.shadowed) {
				fail(e.Seq, "the package's fold of the checkpoint shadows %v, the summary names %v", got, open.shadowed)
			}
			open.checkpoint = e.Seq
		case wire.TypeCompactionEnd:
			if open == nil || d.CompactionID != open.id {
				fail(e.Seq, "an end outside its bracket")
			}
			open.end = e.Seq
			if d.Error != nil {
				open.err = *d.Error
			} else if open.checkpoint < 0 {
				fail(e.Seq, "a successful end without a checkpoint")
			}
			out = append(out, *open)
			open = nil
		case wire.TypeEndSeed:
			if open != nil {
				open.stale = true
				out = append(out, *open)
				open = nil
			}
		case wire.TypeCompactionPrune:
			prunes++
			s := d.ShadowedRange
			if s == nil || s.Start != s.End || !slices.Equal(d.ShadowedSeqs, []int64{s.Start}) || i+1 >= len(events) {
				fail(e.Seq, "a prune of %+v %v", s, d.ShadowedSeqs)
			}
			next := events[i+1]
			var op surfaceReplace
			if next.Type != wire.TypeToolResult || json.Unmarshal(next.SurfaceOp, &op) != nil || op != (surfaceReplace{Op: "replace", Start: s.Start, End: s.Start}) ||
				!slices.Equal(next.SourceEventSeqs, []int64{s.Start}) || events[s.Start].Type != wire.TypeToolResult {
				fail(e.Seq, "the prune is not followed by the tool/result replacing the one at %d", s.Start)
			}
			if price, ok := prunePrices[e.Seq]; !ok || price != d.ShadowedTokenCount {
				fail(e.Seq, "the prune's shadowedTokenCount %d, the token meter prices the result at %d", d.ShadowedTokenCount, price)
			}
		}
	}
	if open != nil {
		t.Fatalf("%s: the bracket of seq %d is left open", name, open.start)
	}
	return out, prunes
}

// successful returns the brackets that replaced a span.
func successful(bs []bracket) []bracket {
	var out []bracket
	for _, b := range bs {
		if b.checkpoint >= 0 && b.err == "" {
			out = append(out, b)
		}
	}
	return out
}

// typeAt is the type of the event at seq.
func typeAt(events []loadedEvent, seq int64) string {
	if seq < 0 || seq >= int64(len(events)) {
		return ""
	}
	return events[seq].Type
}

// compactionScenario is one compacting session of
// TestHarnessJudgesCompactingSessions.
type compactionScenario struct {
	name  string
	model *compactModel
	// opts are the session's agent options (route scripted/m1).
	opts  func(*wire.AgentOptions)
	steps []sessionStep
	// wrap registers activities over the agent's.
	wrap func(*sessiontest.Harness, *agent.Activities)
	// check asserts what the scenario is about on the judged log.
	check func(t *testing.T, j judgedCompaction, m *compactModel, run sessionRun)
	// aborted is the turn that ends aborted, 0 when every turn completes.
	aborted int
}

// prompt is a turn's question: tag ("qNN", or with a tool "qNN [list_dir
// .]") and about n tokens of words.
func prompt(tag string, n int) sessionStep {
	return sessionStep{prompt: tag + " " + words(n)}
}

func window(w float64) func(*wire.AgentOptions) {
	return func(o *wire.AgentOptions) { o.ContextWindow = &w }
}

// TestHarnessJudgesCompactingSessions runs sessions that compact through
// the workflows (the session workflows, the real agent activities and the
// built-in tools, a scripted model) on a format v0 root and judges every
// log with the harness's own code (judgeCompactions): under pressure over
// many turns with a small window, tool calls among them and a tool result
// pruned; recovering from context-exceeded refusals with autoCompact off,
// and from the refusal of a step after a tool result by a model whose
// window the agent does not know (the call stays with its result);
// the Compact update between turns, twice (the second summarises the
// first's checkpoint); one Compact update over a long history with a tiny
// window, compacted in pieces; and a turn cancelled while it compacts, on a
// worker whose closing of the bracket is lost, so that EndTurn closes it.
func TestHarnessJudgesCompactingSessions(t *testing.T) {
	const answer = "An answer of a few words, enough to weigh on the window: the model says what it found and what it will do next."
	scenarios := []compactionScenario{
		{name: "pressure",
			model: &compactModel{answer: answer},
			opts:  window(2400),
			steps: []sessionStep{
				prompt("q01", 150), prompt("q02 [list_dir .]", 100), prompt("q03", 200), prompt("q04 [read_file notes.txt]", 80),
				prompt("q05", 150), prompt("q06", 250), prompt("q07 [read_file big.txt]", 60), prompt("q08", 150),
				prompt("q09 [list_dir .]", 100), prompt("q10", 200), prompt("q11", 150), prompt("q12 [read_file a.txt]", 100),
			},
			check: func(t *testing.T, j judgedCompaction, m *compactModel, _ sessionRun) {
				maxTokens, refused, summaries := m.stats()
				if refused != 0 || maxTokens > 2400 {
					t.Errorf("requests over the window: %d refused, the largest of %d tokens", refused, maxTokens)
				}
				ok := successful(j.brackets)
				if len(ok) < 3 || len(ok) != len(j.brackets) || summaries != len(ok) {
					t.Errorf("%d brackets, %d successful, %d summarisation calls; want 3 or more, all successful", len(j.brackets), len(ok), summaries)
				}
				pairs := 0
				for _, b := range j.brackets {
					if b.turn == nil {
						t.Errorf("the bracket of seq %d has no turn", b.start)
					}
					for _, s := range b.shadowed {
						if typeAt(j.events, s) == wire.TypeToolResult {
							pairs++
						}
					}
				}
				if pairs == 0 {
					t.Errorf("no compaction shadowed a tool call and its result")
				}
				if j.prunes == 0 {
					t.Errorf("no tool result was pruned")
				}
			}},
		{name: "overflow",
			model: &compactModel{answer: answer, window: 2400},
			opts: func(o *wire.AgentOptions) {
				off := false
				o.AutoCompact = &off
			},
			steps: []sessionStep{
				prompt("q01", 200), prompt("q02 [list_dir .]", 150), prompt("q03", 250), prompt("q04", 200),
				prompt("q05 [read_file notes.txt]", 100), prompt("q06", 250), prompt("q07", 200), prompt("q08", 250),
			},
			check: func(t *testing.T, j judgedCompaction, m *compactModel, _ sessionRun) {
				_, refused, _ := m.stats()
				for _, b := range j.brackets {
					if b.err != "" || b.checkpoint < 0 {
						t.Errorf("the bracket of seq %d failed: %q", b.start, b.err)
					}
				}
				// Each refusal is stored as its call's finish and
				// compacted from at once; the step's call is made again.
				refusals := refusalAt(j.events)
				for _, seq := range refusals {
					if next := typeAt(j.events, afterPrunes(j.events, seq)); next != wire.TypeCompactionStart {
						t.Errorf("the refusal at seq %d is followed by %s, not a compaction", seq, next)
					}
				}
				if refused == 0 || len(refusals) != refused {
					t.Errorf("the model refused %d requests, the log records %d refusals; want one or more, each recorded", refused, len(refusals))
				}
			}},
		{name: "overflow-unknown-window",
			// A refusal after a tool result, by a model whose window
			// the agent does not know: the span is everything before
			// the step's tool call, which stays with its result.
			model: &compactModel{answer: answer, window: 1900, hideWindow: true},
			steps: []sessionStep{prompt("q01", 350), prompt("q02 [read_file big.txt]", 20), prompt("q03", 60)},
			check: func(t *testing.T, j judgedCompaction, m *compactModel, _ sessionRun) {
				_, refused, _ := m.stats()
				ok := successful(j.brackets)
				if refused != 1 || len(ok) != 1 || len(j.brackets) != 1 {
					t.Fatalf("%d refusals, %d brackets (%d successful); want one of each", refused, len(j.brackets), len(ok))
				}
				b := ok[0]
				refusal := refusalAt(j.events)
				if len(refusal) != 1 || !strings.Contains(string(j.events[refusal[0]].Data), `"turn":2,"step":2,`) || afterPrunes(j.events, refusal[0]) != b.start {
					t.Fatalf("the refusals %v; want one, of turn 2's second step, that the bracket of seq %d follows", refusal, b.start)
				}
				last := b.shadowed[len(b.shadowed)-1]
				if typeAt(j.events, last) != wire.TypeUserMessage || j.prunes != 1 {
					t.Errorf("the compaction shadows %v, ending with %s, after %d prunes; want the span up to turn 2's question, after the result's prune", b.shadowed, typeAt(j.events, last), j.prunes)
				}
			}},
		{name: "compact-update",
			model: &compactModel{answer: answer},
			steps: []sessionStep{
				prompt("q01", 150), prompt("q02 [list_dir .]", 100), prompt("q03", 150),
				{compact: "compact-1"},
				prompt("q04 [read_file a.txt]", 100), prompt("q05", 100),
				{compact: "compact-2"},
				prompt("q06", 100),
			},
			check: func(t *testing.T, j judgedCompaction, _ *compactModel, run sessionRun) {
				if len(j.brackets) != 2 {
					t.Fatalf("%d brackets, want one per Compact update", len(j.brackets))
				}
				for i, b := range j.brackets {
					cmd := fmt.Sprintf("compact-%d", i+1)
					if b.turn != nil || b.command != cmd || b.err != "" || b.before != wire.TypeCommandRun || typeAt(j.events, b.end+1) != wire.TypeCommandDone {
						t.Errorf("bracket %d: turn %v, command %q, error %q, after %s, before %s; want a standalone one of %s between command/run and command/done",
							i, b.turn, b.command, b.err, b.before, typeAt(j.events, b.end+1), cmd)
					}
					if r := run.compacts[i]; !r.Compacted || r.CommandID != cmd || r.Shadowed != len(b.shadowed) || r.ShadowedTokens != b.shadowedTokens {
						t.Errorf("Compact %s returned %+v, the log's bracket shadows %d nodes of %d tokens", cmd, r, len(b.shadowed), b.shadowedTokens)
					}
				}
				if j.brackets[1].shadowed[0] != j.brackets[0].checkpoint {
					t.Errorf("the second compaction shadows %v, not from the first's checkpoint %d", j.brackets[1].shadowed, j.brackets[0].checkpoint)
				}
			}},
		{name: "pieces",
			model: &compactModel{answer: "A short answer."},
			opts: func(o *wire.AgentOptions) {
				off, w := false, 2000.0
				o.AutoCompact, o.ContextWindow = &off, &w
			},
			steps: append(func() []sessionStep {
				var s []sessionStep
				for i := range 14 {
					s = append(s, prompt(fmt.Sprintf("q%02d", i+1), 70))
				}
				return s
			}(), sessionStep{compact: "compact-1"}, prompt("q15", 40)),
			check: func(t *testing.T, j judgedCompaction, _ *compactModel, run sessionRun) {
				if len(j.brackets) < 3 {
					t.Fatalf("%d brackets, want the history compacted in 3 pieces or more", len(j.brackets))
				}
				for i, b := range j.brackets {
					if b.turn != nil || b.command != "compact-1" || b.err != "" || b.checkpoint < 0 {
						t.Errorf("piece %d: turn %v, command %q, error %q", i, b.turn, b.command, b.err)
					}
					if i == 0 {
						if b.before != wire.TypeCommandRun {
							t.Errorf("the first piece follows %s, not command/run", b.before)
						}
						continue
					}
					prev := j.brackets[i-1]
					if b.start != prev.end+1 || b.shadowed[0] != prev.checkpoint {
						t.Errorf("piece %d (seq %d) does not go on from piece %d (end %d, checkpoint %d): it shadows %v", i, b.start, i-1, prev.end, prev.checkpoint, b.shadowed)
					}
				}
				last := j.brackets[len(j.brackets)-1]
				if typeAt(j.events, last.end+1) != wire.TypeCommandDone || !run.compacts[0].Compacted {
					t.Errorf("the last piece is followed by %s; Compact returned %+v", typeAt(j.events, last.end+1), run.compacts[0])
				}
			}},
		{name: "cancelled",
			model:   &compactModel{answer: answer, stall: true},
			opts:    window(2000),
			steps:   []sessionStep{prompt("q01", 300), prompt("q02", 300), {prompt: "q03 " + words(600), cancel: true}},
			wrap:    loseBracketClosing,
			aborted: 3,
			check: func(t *testing.T, j judgedCompaction, _ *compactModel, run sessionRun) {
				if len(j.brackets) != 1 {
					t.Fatalf("%d brackets, want the cancelled one", len(j.brackets))
				}
				b := j.brackets[0]
				if b.turn == nil || *b.turn != 3 || b.summary >= 0 || b.err != "the turn ended before its compaction finished" {
					t.Errorf("the bracket: turn %v, summary %d, error %q; want turn 3 closed by EndTurn without a summary", b.turn, b.summary, b.err)
				}
				if end := typeAt(j.events, b.end+1); end != wire.TypeStepEnd && end != wire.TypeTurnEnd {
					t.Errorf("the bracket's end is followed by %s, not the turn's closing", end)
				}
				if len(run.cancels) != 1 || !run.cancels[0].Cancelled || run.cancels[0].Turn != 3 {
					t.Errorf("Cancel returned %+v", run.cancels)
				}
			}},
	}
	var logs []compactedLog
	var runs []sessionRun
	for _, sc := range scenarios {
		root, id := t.TempDir(), "compact-"+sc.name
		m := sc.model
		if m.stall {
			m.releaseAtEnd(t)
		}
		h := compactingHarness(t, root, id, m, sc.wrap)
		opts := sessiontest.Route()
		if sc.opts != nil {
			sc.opts(opts)
		}
		req := workflows.CreateSessionRequest{SessionID: id, AgentOptions: opts, Meta: &wire.SessionMeta{Cwd: workspace(t)}}
		runs = append(runs, runSteps(t, h, m, sc.steps, func() { h.Env.ExecuteWorkflow(workflows.CreateSession, req) }))
		logs = append(logs, compactedLog{name: sc.name, root: root, id: id})
	}
	judged := judgeCompactions(t, logs)
	for i, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			j := judged[i]
			if len(j.brackets) == 0 {
				t.Fatal("the session did not compact")
			}
			var want []string
			for _, s := range sc.steps {
				if s.prompt != "" {
					want = append(want, "completed")
				}
			}
			if sc.aborted > 0 {
				want[sc.aborted-1] = "aborted"
			}
			if got := turnEnds(t, j.events); !slices.Equal(got, want) {
				t.Errorf("the turns ended %v, want %v", got, want)
			}
			sc.check(t, j, sc.model, runs[i])
			t.Logf("%d events, %d brackets (%d successful), %d prunes", len(j.events), len(j.brackets), len(successful(j.brackets)), j.prunes)
		})
	}
}

// loseBracketClosing registers, over the agent's Compact activity, one
// that fails the closing of a bracket (a Compact with Close) as a worker
// lost before it could store it would: the turn's EndTurn must close the
// bracket.
func loseBracketClosing(h *sessiontest.Harness, acts *agent.Activities) {
	h.Env.RegisterActivityWithOptions(func(ctx context.Context, in agent.CompactInput) (agent.CompactResult, error) {
		if in.Close != "" {
			return agent.CompactResult{}, temporal.NewNonRetryableApplicationError("the worker was lost", "WorkerLost", nil)
		}
		return acts.Compact(ctx, in)
	}, activity.RegisterOptions{Name: wire.CompactActivity, DisableAlreadyRegisteredCheck: true})
}

// turnEnds are the reason kinds of the turn/end events, in order.
func turnEnds(t *testing.T, events []loadedEvent) []string {
	t.Helper()
	var out []string
	for _, e := range events {
		if e.Type != wire.TypeTurnEnd {
			continue
		}
		var d struct {
			Reason struct {
				Kind string `json:"kind"`
			} `json:"reason"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d.Reason.Kind)
	}
	return out
}

// TestCompactedLogCutAndResumed: a log of a session that compacted under
// pressure inside a turn, cut inside its first compaction as a crash
// leaves it (after compaction/start; after the summary; after the
// checkpoint), written by the package. The harness's invariants pass each
// cut log (the open start goes stale at the end-seed marker the resume
// seeds it with). Each is resumed and continued through the workflows as
// the corpus logs are (continueOn: the resume stores the package's closers
// and the end-seed marker, one more turn runs), and resumed once more with
// a small window so that its turns compact again; the package loads
// both continued logs, its invariants pass, and the harness derives the
// conversation sessionflow derives (judgeCompactions).
func TestCompactedLogCutAndResumed(t *testing.T) {
	const id = "compact-cut"
	src := t.TempDir()
	m := &compactModel{answer: "An answer of a few words, enough to weigh on the window."}
	h := compactingHarness(t, src, id, m, nil)
	opts := sessiontest.Route()
	window(2000)(opts)
	req := workflows.CreateSessionRequest{SessionID: id, AgentOptions: opts, Meta: &wire.SessionMeta{Cwd: workspace(t)}}
	runSteps(t, h, m, []sessionStep{prompt("q01", 250), prompt("q02 [list_dir .]", 200), prompt("q03", 300), prompt("q04", 300), prompt("q05", 200)},
		func() { h.Env.ExecuteWorkflow(workflows.CreateSession, req) })
	source := judgeCompactions(t, []compactedLog{{name: "source", root: src, id: id}})[0]
	var b *bracket
	for i := range source.brackets {
		if x := &source.brackets[i]; x.turn != nil && x.checkpoint >= 0 {
			b = x
			break
		}
	}
	if b == nil {
		t.Fatalf("the source session did not compact inside a turn: %+v", source.brackets)
	}
	cuts := []struct {
		name string
		at   int64 // the number of events kept
	}{{"after-start", b.start + 1}, {"after-summary", b.summary + 1}, {"after-checkpoint", b.checkpoint + 1}}

	// The package writes each cut log into a root of its own.
	dir := t.TempDir()
	type write struct {
		Root        string            `json:"root"`
		Compression string            `json:"compression"`
		Meta        json.RawMessage   `json:"meta"`
		Events      []json.RawMessage `json:"events"`
	}
	var writes []write
	for _, c := range cuts {
		writes = append(writes, write{Root: filepath.Join(dir, c.name), Compression: "none", Meta: source.verdict.Meta, Events: source.verdict.Events[:c.at]})
	}
	var res []struct {
		Error string `json:"error"`
	}
	runScript(t, "write.mjs", map[string]any{"sessions": writes}, &res)
	if len(res) != len(writes) {
		t.Fatalf("write.mjs wrote %d sessions, want %d", len(res), len(writes))
	}
	var inputs []judgeInput
	for i, r := range res {
		if r.Error != "" {
			t.Fatalf("the package does not write the log cut %s: %s", cuts[i].name, r.Error)
		}
		inputs = append(inputs, judgeInput{Root: copyOf(t, writes[i].Root, ""), Compression: "none", ID: id})
	}
	// What the package's load makes of each cut log.
	cutVerdicts := judgeAll(t, inputs)
	var meta map[string]any
	if err := json.Unmarshal(source.verdict.Meta, &meta); err != nil {
		t.Fatal(err)
	}
	keep := t.TempDir()
	var continued []compactedLog
	for i, c := range cuts {
		v := cutVerdicts[i]
		if !v.Accepted || v.InvariantError != "" {
			t.Fatalf("%s: the package's load: %s %s; its invariants: %s", c.name, v.ErrorName, v.Error, v.InvariantError)
		}
		all := plainJSON(t, v.Events)
		stored, closers := all[:c.at], all[c.at:]
		var types []string
		for _, e := range closers {
			types = append(types, e.(map[string]any)["type"].(string))
		}
		if strings.Join(types, ",") != "step/end,turn/end" {
			t.Fatalf("%s: the package's load closes the cut turn with %v, want its step and its turn", c.name, types)
		}
		cl := continueOn(t, restoredLog{Rel: "cut/" + c.name, Compression: "none", Root: writes[i].Root, ID: id, Events: int(c.at), Loaded: true},
			jsonl.FormatV0, meta, stored, closers, keep)
		continued = append(continued, compactedLog{name: c.name + "/continued", root: cl.root, id: id})

		// Resumed with a small window: its turns compact again.
		root := copyOf(t, writes[i].Root, keep)
		m := &compactModel{answer: "Resumed."}
		h := compactingHarness(t, root, id, m, nil)
		w := 3000.0
		runSteps(t, h, m, []sessionStep{prompt("q06", 1000), prompt("q07", 100)}, func() {
			h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: id, AgentOptions: &wire.AgentOptions{ContextWindow: &w}})
		})
		continued = append(continued, compactedLog{name: c.name + "/compacting", root: root, id: id})
	}
	judged := judgeCompactions(t, continued)
	for i, l := range continued {
		j := judged[i]
		// The cut bracket is the first, left open (stale) at the end-seed
		// marker the resume stored.
		if len(j.brackets) == 0 || j.brackets[0].start != b.start || !j.brackets[0].stale {
			t.Errorf("%s: the cut bracket of seq %d is not left open before the end-seed marker: %+v", l.name, b.start, j.brackets)
			continue
		}
		// The resumed session's first turn.
		next := int64(0)
		for _, e := range j.events[b.start:] {
			if e.Type == wire.TypeTurnStart {
				var d struct {
					Turn int64 `json:"turn"`
				}
				if err := json.Unmarshal(e.Data, &d); err != nil {
					t.Fatal(err)
				}
				next = d.Turn
				break
			}
		}
		later := successful(j.brackets[1:])
		if strings.HasSuffix(l.name, "/compacting") && (len(later) == 0 || later[0].turn == nil || *later[0].turn < next) {
			t.Errorf("%s: the resumed session did not compact in its turns (from %d): %+v", l.name, next, j.brackets[1:])
		}
		t.Logf("%s: %d events, %d brackets", l.name, len(j.events), len(j.brackets))
	}
}

// restoreSnapshot has the package restore one corpus log into a root of
// its own under dir (restore.mjs).
func restoreSnapshot(t *testing.T, dir, rel string) restoredLog {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join(corpusDir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	var out []restoredLog
	runScript(t, "restore.mjs", map[string]any{"cwd": corpusCwd, "outDir": dir, "compressions": []string{"none"},
		"logs": []map[string]string{{"rel": rel, "path": abs}}}, &out)
	if len(out) != 1 || !out[0].Loaded {
		t.Fatalf("restore.mjs: %+v", out)
	}
	return out[0]
}

// TestHarnessCompactionSnapshotContinuesCompacting: the harness's own
// snapshot of a compaction after a context-exceeded refusal
// (examples/headless-agent/tests/snapshots/compaction-recovery), restored
// by the package, is resumed through the workflows with its route and
// continued twice: with a small window, so that its next turn compacts
// under pressure (the span holds the harness's own checkpoint and its tool
// call and result); and with the Compact update between two turns. The
// package loads both logs, its invariants pass, and the harness derives the
// conversation sessionflow derives; the harness's own summary passes the
// same checks as sessionflow's (its shadowedTokenCount is the token
// meter's price of what it shadows).
func TestHarnessCompactionSnapshotContinuesCompacting(t *testing.T) {
	const rel = "examples/headless-agent/tests/snapshots/compaction-recovery/session.jsonl"
	r := restoreSnapshot(t, t.TempDir(), rel)
	variants := []struct {
		name  string
		w     float64
		steps []sessionStep
	}{
		{"pressure", 1800, []sessionStep{prompt("q01", 800), prompt("q02", 60)}},
		{"compact-update", 0, []sessionStep{prompt("q01", 150), {compact: "compact-1"}, prompt("q02", 60)}},
	}
	var logs []compactedLog
	var runs []sessionRun
	for _, v := range variants {
		root := copyOf(t, r.Root, "")
		m := &compactModel{answer: "Continued after the harness's compaction."}
		h := compactingHarness(t, root, r.ID, m, nil, "deepseek-official")
		var opts *wire.AgentOptions
		if v.w > 0 {
			opts = &wire.AgentOptions{ContextWindow: &v.w}
		}
		runs = append(runs, runSteps(t, h, m, v.steps, func() {
			h.Env.ExecuteWorkflow(workflows.ResumeSession, wire.ResumeSessionRequest{ResumeSessionID: r.ID, AgentOptions: opts})
		}))
		logs = append(logs, compactedLog{name: v.name, root: root, id: r.ID})
	}
	judged := judgeCompactions(t, logs)
	for i, v := range variants {
		j := judged[i]
		// The harness's own bracket (turn 1, from seq 19), then
		// sessionflow's.
		if len(j.brackets) < 2 || j.brackets[0].start != 19 || j.brackets[0].checkpoint != 21 {
			t.Errorf("%s: the brackets %+v, want the harness's at seq 19 and sessionflow's", v.name, j.brackets)
			continue
		}
		b := j.brackets[1]
		switch v.name {
		case "pressure":
			if b.turn == nil || *b.turn != 2 || b.err != "" || b.shadowed[0] != 21 {
				t.Errorf("%s: the continued turn's compaction: %+v; want one in turn 2 from the harness's checkpoint (seq 21)", v.name, b)
			}
		case "compact-update":
			if b.turn != nil || b.command != "compact-1" || b.err != "" || b.shadowed[0] != 21 || !runs[i].compacts[0].Compacted {
				t.Errorf("%s: the Compact update's compaction: %+v (%+v); want a standalone one from the harness's checkpoint (seq 21)", v.name, b, runs[i].compacts)
			}
		}
		t.Logf("%s: %d events, %d brackets", v.name, len(j.events), len(j.brackets))
	}
}

// refusalAt returns the seqs of the assistant/chunk events that record a
// context-exceeded refusal as a call's finish.
func refusalAt(events []loadedEvent) []int64 {
	var out []int64
	for _, e := range events {
		if e.Type == wire.TypeAssistantChunk && strings.Contains(string(e.Data), `"code":"CONTEXT_WINDOW_EXCEEDED"`) {
			out = append(out, e.Seq)
		}
	}
	return out
}

// afterPrunes returns the seq of the first event after seq that is not a
// compaction/prune or the pruned tool/result following one.
func afterPrunes(events []loadedEvent, seq int64) int64 {
	next := seq + 1
	for typeAt(events, next) == wire.TypeCompactionPrune {
		next += 2
	}
	return next
}
