package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/testsuite/testdeadline"
)

// storedBlock is a content block as a log stores it; a tool call's
// arguments are the model's JSON text, a JSON string.
type storedBlock struct {
	Type       string          `json:"type"`
	Text       string          `json:"text"`
	Signature  string          `json:"signature"`
	ID         string          `json:"id"`
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	ToolCallID string          `json:"toolCallId"`
	IsError    bool            `json:"isError"`
	Content    []storedBlock   `json:"content"`
}

// providerBlocks converts stored blocks to the provider's. A block of a
// type the provider does not know keeps the fields provider.Block has.
func providerBlocks(in []storedBlock) ([]provider.Block, error) {
	out := make([]provider.Block, 0, len(in))
	for _, b := range in {
		pb := provider.Block{Type: b.Type, Text: b.Text, Signature: b.Signature, ID: b.ID, Name: b.Name, ToolCallID: b.ToolCallID, IsError: b.IsError}
		if len(b.Arguments) > 0 && string(b.Arguments) != "null" {
			if err := json.Unmarshal(b.Arguments, &pb.Arguments); err != nil {
				return nil, fmt.Errorf("tool-call %q: arguments are not a JSON string: %w", b.ID, err)
			}
		}
		content, err := providerBlocks(b.Content)
		if err != nil {
			return nil, err
		}
		if len(content) > 0 {
			pb.Content = content
		}
		out = append(out, pb)
	}
	return out, nil
}

// estimate is one price of content, by the package (estimate.mjs) or by
// sessionflow; Content and Message are nil for an event without a message.
type estimate struct {
	Content   *int   `json:"content"`
	Message   *int   `json:"message"`
	Error     string `json:"error"`
	ErrorName string `json:"errorName"`
}

func (e estimate) String() string {
	if e.Error != "" {
		return e.ErrorName + ": " + e.Error
	}
	if e.Content == nil || e.Message == nil {
		return "no message"
	}
	return fmt.Sprintf("content %d, message %d", *e.Content, *e.Message)
}

// same reports whether two prices are equal.
func (e estimate) same(o estimate) bool { return e.String() == o.String() }

// goEstimate prices a message of role with content as sessionflow does.
func goEstimate(role string, content []storedBlock) (estimate, error) {
	blocks, err := providerBlocks(content)
	if err != nil {
		return estimate{}, err
	}
	c, m := provider.EstimateContent(blocks), provider.EstimateMessage(provider.Message{Role: role, Content: blocks})
	return estimate{Content: &c, Message: &m}, nil
}

// goEventEstimate derives the message of a log event as the harness does
// (a user/message's data, an assistant/message's data.message unless its
// content is empty, a tool/result's data.message; no other event has one)
// and prices it as sessionflow does.
func goEventEstimate(line []byte) (estimate, error) {
	type message struct {
		Role    string        `json:"role"`
		Content []storedBlock `json:"content"`
	}
	var e struct {
		Type string `json:"type"`
		Data struct {
			message
			Message *message `json:"message"`
		} `json:"data"`
	}
	if err := json.Unmarshal(line, &e); err != nil {
		return estimate{}, err
	}
	var m *message
	switch e.Type {
	case "user/message":
		m = &e.Data.message
	case "assistant/message":
		if e.Data.Message != nil && len(e.Data.Message.Content) > 0 {
			m = e.Data.Message
		}
	case "tool/result":
		m = e.Data.Message
	}
	if m == nil {
		return estimate{}, nil
	}
	return goEstimate(m.Role, m.Content)
}

// packageEstimates prices each input line (an estimate.mjs input object)
// with the package's token meter.
func packageEstimates(t *testing.T, lines [][]byte) []estimate {
	t.Helper()
	var in bytes.Buffer
	for _, l := range lines {
		in.Write(l)
		in.WriteByte('\n')
	}
	ctx := testdeadline.Context(t, 2*time.Minute)
	cmd := exec.CommandContext(ctx, nodeBinary(t), "estimate.mjs")
	cmd.Dir = harnessDir
	cmd.Stdin = &in
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("estimate.mjs: %v\nstderr:\n%s", err, stderr.String())
	}
	dec := json.NewDecoder(&stdout)
	out := make([]estimate, len(lines))
	for i := range out {
		if err := dec.Decode(&out[i]); err != nil {
			t.Fatalf("estimate.mjs price %d of %d: %v\nstderr:\n%s", i, len(lines), err, stderr.String())
		}
	}
	return out
}

// estimateDivergences are the prices on which sessionflow's estimate and
// the package's disagree, by case, with both prices ({package,
// sessionflow} for the content): blocks of a type neither prices by its
// fields. The package prices such a block by the length of its
// JSON.stringify text; sessionflow by the json.Marshal text of its
// provider.Block, which has none of the block's other fields (an image's
// attachment), omits empty ones and escapes <, > and & as \u003c... Key
// order plays no part: a length does not depend on it. The test fails when
// a price disagrees elsewhere, or here otherwise than recorded.
var estimateDivergences = map[string][2]int{
	"an unknown block with an empty text": {11, 9},  // sessionflow leaves out "text":""
	"an unknown block with markup":        {12, 14}, // sessionflow writes "\u003cb\u003e"
	"an image":                            {37, 8},  // sessionflow has no attachment
	"an image in a tool result":           {47, 18},
	"examples/acp-agent/tests/snapshots/code-mode-read-image/session.jsonl at seq 24": {84, 39},
	"examples/acp-agent/tests/snapshots/inline-image-prompt/session.jsonl at seq 4":   {73, 33},
	"examples/acp-agent/tests/snapshots/read-image-dimension/session.jsonl at seq 15": {91, 45},
	"examples/acp-agent/tests/snapshots/read-image/session.jsonl at seq 15":           {88, 43},
}

// TestEstimateMatchesTheTokenMeter prices content blocks with sessionflow's
// estimate (provider.EstimateContent, provider.EstimateMessage) and with the
// package's token meter (estimate.mjs) and compares: hand-written blocks
// (ASCII, multi-byte UTF-8, astral characters of two UTF-16 units, escaped
// surrogates, empty texts, reasoning, tool calls, tool results with nested
// content, blocks of unknown types) and the message of every user/message,
// assistant/message and tool/result of the corpus logs.
func TestEstimateMatchesTheTokenMeter(t *testing.T) {
	// want is the package's price of the content, counted by hand: a text
	// is ceil(UTF-16 units / 4) tokens, each block adds 4 (a message adds
	// 4 more).
	cases := []struct {
		name, content string
		want          int
	}{
		{name: "ASCII", content: `[{"type":"text","text":"hello world"}]`, want: 3 + 4},
		{name: "a multiple of four", content: `[{"type":"text","text":"abcdefgh"}]`, want: 2 + 4},
		{name: "an empty text", content: `[{"type":"text","text":""}]`, want: 0 + 4},
		{name: "two-byte UTF-8", content: `[{"type":"text","text":"héllo wörld"}]`, want: 3 + 4}, // 11 units, 13 bytes
		{name: "three-byte UTF-8", content: `[{"type":"text","text":"日本語のテキスト"}]`, want: 2 + 4},  // 8 units, 24 bytes
		{name: "astral characters", content: `[{"type":"text","text":"😀😀😀"}]`, want: 2 + 4},      // 6 units, 3 code points
		{name: "an astral character after ASCII", content: `[{"type":"text","text":"abc😀"}]`, want: 2 + 4},
		{name: "an escaped surrogate pair", content: `[{"type":"text","text":"\ud83d\ude00!"}]`, want: 1 + 4},
		{name: "a lone surrogate", content: `[{"type":"text","text":"\ud800ab"}]`, want: 1 + 4},
		{name: "a reasoning block", content: `[{"type":"reasoning","text":"Let me think.","signature":"c2lnbmF0dXJl"}]`, want: 4 + 4},
		{name: "an empty reasoning block", content: `[{"type":"reasoning","text":""}]`, want: 0 + 4},
		{name: "a tool call", content: `[{"type":"tool-call","id":"call_1","name":"bash","arguments":"{\"command\":\"ls\"}"}]`, want: 1 + 4 + 4},
		{name: "a tool call priced apart", content: `[{"type":"tool-call","id":"c","name":"ls","arguments":"{}"}]`, want: 1 + 1 + 4},
		{name: "a tool call without arguments", content: `[{"type":"tool-call","id":"call_1","name":"list_agents","arguments":""}]`, want: 3 + 0 + 4},
		{name: "a tool call with astral arguments", content: `[{"type":"tool-call","id":"c","name":"say","arguments":"{\"q\":\"😀é\"}"}]`, want: 1 + 3 + 4},
		{name: "a tool result", content: `[{"type":"tool-result","toolCallId":"call_1","content":[{"type":"text","text":"alpha\n"},{"type":"text","text":""}],"isError":false}]`, want: (2 + 4) + (0 + 4) + 4},
		{name: "an empty tool result", content: `[{"type":"tool-result","toolCallId":"call_1","content":[],"isError":true}]`, want: 0 + 4},
		{name: "blocks of each kind", content: `[{"type":"reasoning","text":"hm"},{"type":"text","text":"I will look."},{"type":"tool-call","id":"x","name":"read","arguments":"{}"}]`, want: (1 + 4) + (3 + 4) + (1 + 1 + 4)},
		{name: "no blocks", content: `[]`, want: 0},
		// Blocks of unknown types: the length of their JSON text.
		{name: "an unknown block with a text", content: `[{"type":"custom","text":"abc"}]`, want: 8 + 4}, // 30 characters
		{name: "the same, keys the other way", content: `[{"text":"abc","type":"custom"}]`, want: 8 + 4}, // 30 characters
		{name: "an unknown block with an empty text", content: `[{"type":"custom","text":""}]`, want: 7 + 4},
		{name: "an unknown block with markup", content: `[{"type":"custom","text":"<b>"}]`, want: 8 + 4},
		{name: "an image", content: `[{"type":"image","attachment":{"attachmentId":"sha256:00","mediaType":"image/png","bytes":69,"width":1,"height":1,"name":"red.png"}}]`, want: 33 + 4},
		{name: "an image in a tool result", content: `[{"type":"tool-result","toolCallId":"r","content":[{"type":"text","text":"red.png"},{"type":"image","attachment":{"attachmentId":"sha256:00","mediaType":"image/png","bytes":69,"width":1,"height":1,"name":"red.png"}}],"isError":false}]`, want: (2 + 4) + (33 + 4) + 4},
	}
	type priced struct {
		name string
		goes estimate
		line []byte
	}
	var all []priced
	for _, tc := range cases {
		var content []storedBlock
		if err := json.Unmarshal([]byte(tc.content), &content); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		g, err := goEstimate(provider.RoleUser, content)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		all = append(all, priced{name: tc.name, goes: g, line: []byte(`{"content":` + tc.content + `}`)})
	}
	// The corpus logs as the package loads them (its legacy upgrades
	// applied, its closers appended): what its token meter prices.
	var inputs []judgeInput
	var rels []string
	for _, r := range restoreCorpus(t, filepath.Join(t.TempDir(), "corpus"), "none") {
		if r.Loaded && r.Events > 0 {
			inputs = append(inputs, judgeInput{Root: r.Root, Compression: r.Compression, ID: r.ID})
			rels = append(rels, r.Rel)
		}
	}
	messages := 0
	for i, v := range judgeAll(t, inputs) {
		if !v.Accepted {
			t.Fatalf("%s: the package refuses it: %s: %s", rels[i], v.ErrorName, v.Error)
		}
		for seq, raw := range v.Events {
			switch eventType(t, raw) {
			case "user/message", "assistant/message", "tool/result":
			default:
				continue
			}
			g, err := goEventEstimate(raw)
			if err != nil {
				t.Fatalf("%s at seq %d: %v", rels[i], seq, err)
			}
			messages++
			all = append(all, priced{name: fmt.Sprintf("%s at seq %d", rels[i], seq), goes: g, line: append(append([]byte(`{"event":`), raw...), '}')})
		}
	}
	lines := make([][]byte, len(all))
	for i, p := range all {
		lines[i] = p.line
	}
	pkg := packageEstimates(t, lines)
	for i, tc := range cases {
		if got := pkg[i]; got.Content == nil || *got.Content != tc.want || *got.Message != tc.want+4 {
			t.Errorf("%s: the package prices %v, want content %d, message %d", tc.name, got, tc.want, tc.want+4)
		}
	}
	seen := map[string]bool{}
	diverged := 0
	for i, p := range all {
		n := pkg[i]
		if n.Error != "" {
			t.Errorf("%s: the package cannot price it: %s", p.name, n)
			continue
		}
		if n.same(p.goes) {
			continue
		}
		want, recorded := estimateDivergences[p.name]
		seen[p.name] = true
		switch {
		case !recorded:
			t.Errorf("%s: the package prices %v, sessionflow %v", p.name, n, p.goes)
		case n.Content == nil || p.goes.Content == nil || [2]int{*n.Content, *p.goes.Content} != want:
			t.Errorf("%s: the package prices %v, sessionflow %v; recorded: content %d and %d", p.name, n, p.goes, want[0], want[1])
		default:
			diverged++
		}
	}
	var gone []string
	for name := range estimateDivergences {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		t.Errorf("recorded divergences on which the two now agree (or that are no case): %s", strings.Join(gone, "; "))
	}
	t.Logf("priced %d hand-written contents and %d corpus messages; %d prices diverge as recorded", len(cases), messages, diverged)
}
