package scripted

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"unicode/utf8"

	"github.com/sessionflow/sessionflow/provider"
)

// ErrInvalidScript is matched (errors.Is) by every refusal of a script by
// Parse, Load and New.
var ErrInvalidScript = errors.New("invalid provider script")

// Script is a scripted model: the responses it gives, in order, its
// context window and its answer to compaction calls.
type Script struct {
	// Loop makes the responses wrap around: call i gets response
	// i mod len(Responses). Without it a call past the end is refused with
	// "script exhausted".
	Loop bool `json:"loop,omitempty"`
	// ContextWindow, when positive, is the model's context window in
	// tokens: a request whose provider.EstimateRequest exceeds it is
	// refused before any chunk, with a non-retryable *provider.Error of
	// code provider.CodeContextWindowExceeded and status 400. 0 is none.
	ContextWindow int64 `json:"contextWindow,omitempty"`
	// Compaction answers the requests whose Purpose is
	// provider.PurposeCompaction, which never consume a response of
	// Responses. Nil answers them with the text "Summary of K messages.",
	// K the number of the request's messages before its last (the
	// instruction to summarise).
	Compaction *Response `json:"compaction,omitempty"`
	// Responses are the model's responses; response i answers a request
	// whose conversation holds i assistant messages.
	Responses []Response `json:"responses"`
	// Branches answer the conversations they match in place of
	// Responses: the first branch whose When the text of the
	// conversation's first user message contains (a child session's task,
	// say) answers with its own responses, indexed the same way.
	Branches []Branch `json:"branches,omitempty"`
}

// Branch is the script of the conversations whose first user message
// contains When.
type Branch struct {
	// When is the text the first user message must contain (non-empty).
	When string `json:"when"`
	// Loop and Responses are as Script's.
	Loop      bool       `json:"loop,omitempty"`
	Responses []Response `json:"responses"`
}

// WithBranch returns s with a branch answering the conversations whose
// first user message contains when.
func (s Script) WithBranch(when string, responses ...Response) Script {
	s.Branches = append(slices.Clone(s.Branches), Branch{When: when, Responses: responses})
	return s
}

// Response is one scripted model response. It streams, in order: the
// reasoning, the text, each tool call (the first chunk carries the call's id
// and name), a usage chunk when Usage is set, and the finish chunk.
type Response struct {
	// Reasoning is streamed as reasoning deltas.
	Reasoning string `json:"reasoning,omitempty"`
	// Text is streamed as text deltas.
	Text string `json:"text,omitempty"`
	// ChunkSize is the number of characters (runes) per delta of the
	// reasoning, the text and each tool call's arguments; 0 streams each in
	// one delta.
	ChunkSize int `json:"chunkSize,omitempty"`
	// ToolCalls are the calls the model makes, in order.
	ToolCalls []Call `json:"toolCalls,omitempty"`
	// Finish is the finish reason; by default "tool-calls" when ToolCalls is
	// set, else "stop".
	Finish provider.FinishReason `json:"finish,omitempty"`
	// Usage, when set, is streamed before the finish chunk.
	Usage *provider.Usage `json:"usage,omitempty"`
	// DelayMs is the pause before each chunk, in milliseconds.
	DelayMs int64 `json:"delayMs,omitempty"`
	// Fail, when set, makes the call fail after some chunks.
	Fail *Fail `json:"fail,omitempty"`
	// Stall, when set, makes the call block after some chunks until its
	// context is done.
	Stall *Stall `json:"stall,omitempty"`
}

// Call is a scripted tool call.
type Call struct {
	// ID is the call id; unique within the response.
	ID string `json:"id"`
	// Name is the tool name.
	Name string `json:"name"`
	// Arguments is the raw arguments text the model produces (normally a
	// JSON object). In a script file it is a JSON string, or any other JSON
	// value, which stands for its compact text.
	Arguments string `json:"arguments,omitempty"`
}

// UnmarshalJSON accepts arguments given as a string or as any JSON value.
func (c *Call) UnmarshalJSON(b []byte) error {
	var raw struct {
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	*c = Call{ID: raw.ID, Name: raw.Name}
	if len(raw.Arguments) == 0 || string(raw.Arguments) == "null" {
		return nil
	}
	if raw.Arguments[0] == '"' {
		return json.Unmarshal(raw.Arguments, &c.Arguments)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw.Arguments); err != nil {
		return err
	}
	c.Arguments = compact.String()
	return nil
}

// Fail makes a call fail with a provider.Error after some chunks.
type Fail struct {
	// AfterChunks is the number of chunks streamed before the failure; it is
	// less than the response's chunk count, so the finish chunk never comes.
	AfterChunks int `json:"afterChunks,omitempty"`
	// Retryable, Status, Code and Message fill the provider.Error.
	Retryable bool   `json:"retryable,omitempty"`
	Status    int    `json:"status,omitempty"`
	Code      string `json:"code,omitempty"`
	Message   string `json:"message,omitempty"`
	// RetryAfterMs fills the error's RetryAfter, in milliseconds.
	RetryAfterMs int64 `json:"retryAfterMs,omitempty"`
	// Attempts limits the failure to the first Attempts calls of this
	// response for a session, counted by this Provider value (a process);
	// 0 fails every call.
	Attempts int `json:"attempts,omitempty"`
}

// Stall makes a call block after some chunks until its context is done;
// the call then yields the context's error.
type Stall struct {
	// AfterChunks is the number of chunks streamed before the stall; it is
	// less than the response's chunk count.
	AfterChunks int `json:"afterChunks,omitempty"`
	// Attempts limits the stall to the first Attempts calls of this
	// response for a session, as Fail.Attempts; 0 stalls every call.
	Attempts int `json:"attempts,omitempty"`
}

// Text returns a response that streams s and stops.
func Text(s string) Response { return Response{Text: s} }

// ToolCall returns a response that calls one tool.
func ToolCall(id, name, arguments string) Response {
	return Response{ToolCalls: []Call{{ID: id, Name: name, Arguments: arguments}}}
}

// ToolCalls returns a response that calls the given tools, in order.
func ToolCalls(calls ...Call) Response { return Response{ToolCalls: calls} }

// WithChunkSize returns r streaming n characters per delta.
func (r Response) WithChunkSize(n int) Response { r.ChunkSize = n; return r }

// WithUsage returns r reporting the given token counts.
func (r Response) WithUsage(input, output int64) Response {
	r.Usage = &provider.Usage{InputTokens: input, OutputTokens: output}
	return r
}

// WithFail returns r failing as f says.
func (r Response) WithFail(f Fail) Response { r.Fail = &f; return r }

// WithStall returns r stalling after n chunks.
func (r Response) WithStall(n int) Response { r.Stall = &Stall{AfterChunks: n}; return r }

// Responses returns a script of the given responses, without looping.
func Responses(rs ...Response) Script { return Script{Responses: rs} }

// WithContextWindow returns s with a context window of tokens.
func (s Script) WithContextWindow(tokens int64) Script { s.ContextWindow = tokens; return s }

// WithCompaction returns s answering compaction calls with r.
func (s Script) WithCompaction(r Response) Script { s.Compaction = &r; return s }

// Marshal returns the script as JSON, in the format Parse reads.
func (s Script) Marshal() ([]byte, error) { return json.MarshalIndent(s, "", "  ") }

// Parse reads a script (docs/SCRIPTED.md) strictly: unknown fields,
// trailing data and invalid values are refused with an error that wraps
// ErrInvalidScript and names the response.
func Parse(data []byte) (*Provider, error) {
	var top struct {
		Loop          bool              `json:"loop"`
		ContextWindow json.RawMessage   `json:"contextWindow"`
		Compaction    json.RawMessage   `json:"compaction"`
		Responses     []json.RawMessage `json:"responses"`
		Branches      []json.RawMessage `json:"branches"`
	}
	if err := decodeStrict(data, &top); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidScript, err)
	}
	if top.Responses == nil {
		return nil, fmt.Errorf("%w: no \"responses\" array", ErrInvalidScript)
	}
	s := Script{Loop: top.Loop, Responses: make([]Response, len(top.Responses))}
	if top.ContextWindow != nil {
		// Present: a positive integer, never null, 0 or a fraction.
		if json.Unmarshal(top.ContextWindow, &s.ContextWindow) != nil || s.ContextWindow <= 0 {
			return nil, fmt.Errorf("%w: contextWindow %s is not a positive integer", ErrInvalidScript, top.ContextWindow)
		}
	}
	if top.Compaction != nil {
		if string(top.Compaction) == "null" {
			return nil, fmt.Errorf("%w: compaction: not a response object", ErrInvalidScript)
		}
		s.Compaction = new(Response)
		if err := decodeStrict(top.Compaction, s.Compaction); err != nil {
			return nil, fmt.Errorf("%w: compaction: %w", ErrInvalidScript, err)
		}
	}
	for i, raw := range top.Responses {
		if err := decodeStrict(raw, &s.Responses[i]); err != nil {
			return nil, fmt.Errorf("%w: response %d: %w", ErrInvalidScript, i, err)
		}
	}
	for i, raw := range top.Branches {
		b, err := parseBranch(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: branch %d: %w", ErrInvalidScript, i, err)
		}
		s.Branches = append(s.Branches, b)
	}
	return New(s)
}

// parseBranch reads one branch of a script strictly: its when, loop and
// responses, each response as strictly as the script's own.
func parseBranch(raw json.RawMessage) (Branch, error) {
	var top struct {
		When      string            `json:"when"`
		Loop      bool              `json:"loop"`
		Responses []json.RawMessage `json:"responses"`
	}
	if err := decodeStrict(raw, &top); err != nil {
		return Branch{}, err
	}
	if top.Responses == nil {
		return Branch{}, errors.New("no \"responses\" array")
	}
	b := Branch{When: top.When, Loop: top.Loop, Responses: make([]Response, len(top.Responses))}
	for j, r := range top.Responses {
		if err := decodeStrict(r, &b.Responses[j]); err != nil {
			return Branch{}, fmt.Errorf("response %d: %w", j, err)
		}
	}
	return b, nil
}

// Load reads and parses the script file at path.
func Load(path string) (*Provider, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read provider script: %w", err)
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// decodeStrict decodes exactly one JSON value, refusing unknown fields and
// trailing data.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// validate checks s and returns the chunk count of each response.
func validate(s Script) error {
	if s.Loop && len(s.Responses) == 0 {
		return fmt.Errorf("%w: a looping script needs at least one response", ErrInvalidScript)
	}
	if s.ContextWindow < 0 || s.ContextWindow > provider.MaxSafeInteger {
		return fmt.Errorf("%w: contextWindow %d is outside 1..%d (0 for none)", ErrInvalidScript, s.ContextWindow, int64(provider.MaxSafeInteger))
	}
	if s.Compaction != nil {
		if err := validateResponse(*s.Compaction); err != nil {
			return fmt.Errorf("%w: compaction: %w", ErrInvalidScript, err)
		}
	}
	for i, r := range s.Responses {
		if err := validateResponse(r); err != nil {
			return fmt.Errorf("%w: response %d: %w", ErrInvalidScript, i, err)
		}
	}
	for i, b := range s.Branches {
		if b.When == "" {
			return fmt.Errorf("%w: branch %d: when must not be empty", ErrInvalidScript, i)
		}
		if b.Loop && len(b.Responses) == 0 {
			return fmt.Errorf("%w: branch %d: a looping branch needs at least one response", ErrInvalidScript, i)
		}
		for j, r := range b.Responses {
			if err := validateResponse(r); err != nil {
				return fmt.Errorf("%w: branch %d: response %d: %w", ErrInvalidScript, i, j, err)
			}
		}
	}
	return nil
}

func validateResponse(r Response) error {
	if r.ChunkSize < 0 {
		return fmt.Errorf("chunkSize %d is negative", r.ChunkSize)
	}
	if r.DelayMs < 0 {
		return fmt.Errorf("delayMs %d is negative", r.DelayMs)
	}
	if !utf8.ValidString(r.Text) || !utf8.ValidString(r.Reasoning) {
		return errors.New("text or reasoning is not valid UTF-8")
	}
	switch r.Finish {
	case "", provider.FinishStop, provider.FinishToolCalls, provider.FinishMaxTokens:
	default:
		return fmt.Errorf("unknown finish %q (stop, tool-calls or max-tokens)", r.Finish)
	}
	seen := make(map[string]bool, len(r.ToolCalls))
	for j, c := range r.ToolCalls {
		switch {
		case c.ID == "" || c.Name == "":
			return fmt.Errorf("tool call %d needs an id and a name", j)
		case seen[c.ID]:
			return fmt.Errorf("tool call %d repeats the id %q", j, c.ID)
		case !utf8.ValidString(c.ID) || !utf8.ValidString(c.Name) || !utf8.ValidString(c.Arguments):
			return fmt.Errorf("tool call %d is not valid UTF-8", j)
		}
		seen[c.ID] = true
	}
	if u := r.Usage; u != nil {
		for _, v := range [...]int64{u.InputTokens, u.OutputTokens, u.ReasoningTokens, u.CacheReadTokens} {
			if v < 0 || v > provider.MaxSafeInteger {
				return fmt.Errorf("usage token count %d is outside 0..%d", v, int64(provider.MaxSafeInteger))
			}
		}
	}
	n := chunkCount(r)
	if f := r.Fail; f != nil {
		if err := checkInjected("fail", "failure", f.AfterChunks, f.Attempts, n); err != nil {
			return err
		}
		switch {
		case f.Status < 0:
			return fmt.Errorf("fail.status %d is negative", f.Status)
		case f.RetryAfterMs < 0:
			return fmt.Errorf("fail.retryAfterMs %d is negative", f.RetryAfterMs)
		}
	}
	if st := r.Stall; st != nil {
		return checkInjected("stall", "stall", st.AfterChunks, st.Attempts, n)
	}
	return nil
}

// checkInjected checks the afterChunks and attempts of a response's field
// (its failure or stall, what) against the n chunks the response streams.
func checkInjected(field, what string, afterChunks, attempts, n int) error {
	switch {
	case afterChunks < 0 || afterChunks >= n:
		return fmt.Errorf("%s.afterChunks %d is outside 0..%d (the response streams %d chunks and the %s comes before its finish chunk)", field, afterChunks, n-1, n, what)
	case attempts < 0:
		return fmt.Errorf("%s.attempts %d is negative", field, attempts)
	}
	return nil
}

// pieces returns the number of deltas s streams in with chunk size size.
func pieces(s string, size int) int {
	if s == "" {
		return 0
	}
	if size == 0 {
		return 1
	}
	n := utf8.RuneCountInString(s)
	return (n + size - 1) / size
}

// chunkCount returns the number of chunks r streams, finish included.
func chunkCount(r Response) int {
	n := pieces(r.Reasoning, r.ChunkSize) + pieces(r.Text, r.ChunkSize)
	for _, c := range r.ToolCalls {
		n += max(pieces(c.Arguments, r.ChunkSize), 1)
	}
	if r.Usage != nil {
		n++
	}
	return n + 1
}
