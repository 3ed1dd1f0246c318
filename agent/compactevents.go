package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// The compaction events, in the harness's shapes and key order
// (docs/FORMAT.md §9): compaction/start, compaction/summary, the replacing
// user/message that carries the summary, compaction/end, and
// compaction/prune before a pruned tool/result.

// Compaction triggers (CompactInput.Trigger, ModelResult.Compact).
const (
	// TriggerPressure compacts before a step whose request is above the
	// threshold of the context window.
	TriggerPressure = "pressure"
	// TriggerOverflow compacts after the provider refused a step's request
	// as too long for its context window, before the step's one retry.
	TriggerOverflow = "context-overflow"
	// TriggerManual compacts between turns on request (the Compact update).
	TriggerManual = "manual"
)

// compactPlugin is the plugin of a compaction checkpoint's message source.
const compactPlugin = "compact"

// Texts of the checkpoint and of the summarisation request, byte for byte
// the harness's (dsh-compaction-basic).
const (
	summaryOpenTag  = "<compacted-summary>"
	summaryCloseTag = "</compacted-summary>"
	// checkpointPreamble frames the summary as established context.
	checkpointPreamble = "This is an automatically generated checkpoint condensing an earlier span of the conversation to free up context. Treat the captured context as established background and build on it without restating it. Continue the task directly from the messages that follow, without acknowledging this checkpoint."
	// pruneMarker stands for the middle of a pruned tool result.
	pruneMarker = "\n\n[... tool result middle pruned ...]\n\n"
)

// compactionInstruction is the last user message of a summarisation
// request: the conversation above it is the span to condense.
var compactionInstruction = strings.Join([]string{
	"You are now acting as a compaction engine for this AI coding assistant. Condense the conversation ABOVE into a structured checkpoint that lets another model resume the work with no loss of essential context.",
	"",
	"Output EXACTLY the Markdown structure below: keep every section, in order. Use terse bullets, not prose paragraphs. Write \"(none)\" for an empty section — never drop a section.",
	"",
	"## Primary Request and Intent",
	"- [the user's original and evolving goals; quote verbatim where the exact wording matters]",
	"",
	"## Key Technical Concepts",
	"- [technologies, frameworks, patterns, and conventions in play]",
	"",
	"## Files and Code",
	"- [exact path: why it matters, key changes or snippets]",
	"",
	"## Errors and Fixes",
	"- [error: how it was resolved, plus any related user feedback]",
	"",
	"## Pending Jobs",
	"- [explicitly requested work not yet completed]",
	"",
	"## Current Work",
	"- [precisely what was in progress at this checkpoint]",
	"",
	"## Next Step",
	"- [the single next action, directly in line with the most recent request, or \"(none)\"]",
	"",
	"## Critical Context",
	"- [decisions and their rationale, constraints, user preferences, open questions, data needed to continue]",
	"",
	"Rules:",
	"- Write concise English engineering prose. Preserve exact file paths, commands, error strings, identifiers, numeric values, function signatures, and syntax fragments.",
	"- Capture user feedback and explicit instructions faithfully, especially corrections.",
	"- Do NOT mention this summarization request or that the context was compacted.",
	"- Output only the checkpoint text: do not call any tool or take any other action.",
	"- If the conversation already contains a " + summaryOpenTag + " block, it is a PRIOR checkpoint. Do not copy it forward verbatim: preserve still-true facts, drop stale ones, and merge newer information into a single consolidated summary under the same structure.",
}, "\n")

// frameSummary wraps summary text blocks in the checkpoint's framing.
func frameSummary(summary []provider.Block) []provider.Block {
	out := make([]provider.Block, 0, len(summary)+2)
	out = append(out, provider.Block{Type: provider.BlockText, Text: checkpointPreamble + "\n\n" + summaryOpenTag})
	out = append(out, summary...)
	return append(out, provider.Block{Type: provider.BlockText, Text: summaryCloseTag})
}

// compactionStart is the data of compaction/start and, with Error, of
// compaction/end. Turn is null for a standalone compaction between turns.
type compactionStart struct {
	CompactionID    string `json:"compactionId"`
	SourceCommandID string `json:"sourceCommandId,omitempty"`
	Turn            *int64 `json:"turn"`
	Error           string `json:"error,omitempty"`
}

// shadowedRange is the first and last surface node a replacement shadows.
type shadowedRange struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// compactionSummary is the data of compaction/summary.
type compactionSummary struct {
	CompactionID       string           `json:"compactionId"`
	SourceCommandID    string           `json:"sourceCommandId,omitempty"`
	Summary            []provider.Block `json:"summary"`
	RawOutput          []provider.Block `json:"rawOutput"`
	LLMStreamCall      bool             `json:"llmStreamCall"`
	ShadowedRange      shadowedRange    `json:"shadowedRange"`
	ShadowedSeqs       []int64          `json:"shadowedSeqs"`
	ShadowedTokenCount int              `json:"shadowedTokenCount"`
	Provider           string           `json:"provider"`
	Model              string           `json:"model"`
	MaxTokens          int64            `json:"maxTokens,omitempty"`
	Usage              *provider.Usage  `json:"usage,omitempty"`
}

// checkpointSource is the source of a compaction checkpoint's message.
type checkpointSource struct {
	Kind            string `json:"kind"`
	Plugin          string `json:"plugin"`
	CompactionID    string `json:"compactionId"`
	SourceCommandID string `json:"sourceCommandId,omitempty"`
}

// checkpointMessage is the data of the replacing user/message.
type checkpointMessage struct {
	Content []provider.Block `json:"content"`
	Source  checkpointSource `json:"source"`
	Role    string           `json:"role"`
	ID      string           `json:"id"`
}

// compactionPrune is the data of compaction/prune.
type compactionPrune struct {
	ShadowedRange      shadowedRange `json:"shadowedRange"`
	ShadowedSeqs       []int64       `json:"shadowedSeqs"`
	ShadowedTokenCount int           `json:"shadowedTokenCount"`
}

// turnOwner is the owner of a compaction of turn (0: standalone).
func turnOwner(turn int64) *int64 {
	if turn <= 0 {
		return nil
	}
	return &turn
}

// checkpointEvent builds the replacing user/message of a compaction whose
// start and summary are at startSeq and sum.seq, at seq.
func checkpointEvent(seq, now, startSeq, summarySeq int64, sum compactionSummary, msgID string) (session.Event, error) {
	msg := checkpointMessage{
		Content: frameSummary(sum.Summary),
		Source:  checkpointSource{Kind: "plugin", Plugin: compactPlugin, CompactionID: sum.CompactionID, SourceCommandID: sum.SourceCommandID},
		Role:    provider.RoleUser,
		ID:      msgID,
	}
	e, err := session.NewEvent(wire.TypeUserMessage, seq, now, msg)
	if err != nil {
		return session.Event{}, err
	}
	e.SurfaceOp = &session.SurfaceOp{Op: session.SurfaceReplace, StartSeq: sum.ShadowedRange.Start, EndSeq: sum.ShadowedRange.End}
	e.SourceEventSeqs = append([]int64{startSeq, summarySeq}, sum.ShadowedSeqs...)
	return e, nil
}

// pruneSettings are the budgets of tool-result pruning, in Unicode code
// points: a result whose text is over threshold keeps its first head and
// last tail code points around pruneMarker.
type pruneSettings struct {
	threshold, head, tail int
}

// pruneText prunes the text blocks of content (a tool result's content):
// nil when their text is within the threshold.
func (p pruneSettings) pruneText(content []provider.Block) []provider.Block {
	total := 0
	for _, b := range content {
		if b.Type == provider.BlockText {
			total += utf8.RuneCountInString(b.Text)
		}
	}
	if total <= p.threshold {
		return nil
	}
	removedStart, removedEnd := p.head, total-p.tail
	out := make([]provider.Block, 0, len(content))
	consumed, marked := 0, false
	for _, b := range content {
		if b.Type != provider.BlockText {
			out = append(out, b)
			continue
		}
		points := []rune(b.Text)
		start, end := consumed, consumed+len(points)
		headEnd := min(len(points), max(0, removedStart-start))
		tailStart := min(len(points), max(0, removedEnd-start))
		marker := ""
		if start < removedEnd && end > removedStart && !marked {
			marker, marked = pruneMarker, true
		}
		if text := string(points[:headEnd]) + marker + string(points[tailStart:]); text != "" {
			b.Text = text
			out = append(out, b)
		}
		consumed = end
	}
	return out
}

// replaceMember returns the JSON object obj with the value of its member key
// replaced by value, every other member kept as it is, in its place.
func replaceMember(obj json.RawMessage, key string, value json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("replace %q: not a JSON object", key)
	}
	var out bytes.Buffer
	out.WriteByte('{')
	found := false
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if out.Len() > 1 {
			out.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		out.Write(kb)
		out.WriteByte(':')
		if k == key {
			v, found = value, true
		}
		out.Write(v)
	}
	if !found {
		return nil, fmt.Errorf("replace %q: no such member", key)
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}

// prunedResult returns the data of the tool/result e with its result
// block's content pruned, and the shadowed node's price; ok is false when
// e needs no pruning.
func (p pruneSettings) prunedResult(e session.Event, msg provider.Message) (json.RawMessage, bool, error) {
	if len(msg.Content) == 0 || msg.Content[0].Type != provider.BlockToolResult {
		return nil, false, nil
	}
	pruned := p.pruneText(msg.Content[0].Content)
	if pruned == nil {
		return nil, false, nil
	}
	var d struct {
		Message struct {
			Content []json.RawMessage `json:"content"`
		} `json:"message"`
	}
	var whole struct {
		Message json.RawMessage `json:"message"`
	}
	if err := json.Unmarshal(e.Data, &d); err != nil || len(d.Message.Content) == 0 {
		return nil, false, fmt.Errorf("tool/result (seq %d): %w", e.Seq, err)
	}
	if err := json.Unmarshal(e.Data, &whole); err != nil {
		return nil, false, err
	}
	// Only text blocks are pruned; the stored blocks are re-encoded from
	// the pruned ones in order (the result content is text, D66).
	inner, err := json.Marshal(pruned)
	if err != nil {
		return nil, false, err
	}
	block, err := replaceMember(d.Message.Content[0], "content", inner)
	if err != nil {
		return nil, false, err
	}
	blocks := append([]json.RawMessage{block}, d.Message.Content[1:]...)
	content, err := json.Marshal(blocks)
	if err != nil {
		return nil, false, err
	}
	message, err := replaceMember(whole.Message, "content", content)
	if err != nil {
		return nil, false, err
	}
	data, err := replaceMember(e.Data, "message", message)
	if err != nil {
		return nil, false, err
	}
	if data, err = session.CanonicalJSON(data); err != nil {
		return nil, false, err
	}
	return data, true, nil
}
