package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/sessionflow/sessionflow/internal/lib/randhex"
	"github.com/sessionflow/sessionflow/provider"
)

// reasoningFields are the delta fields compatible services stream reasoning
// in, in order of preference: reasoning_content (DeepSeek, vLLM) and
// reasoning (OpenRouter, Ollama, newer vLLM).
var reasoningFields = [...]string{"reasoning_content", "reasoning"}

// decoder maps the chunks of one stream to provider chunks. Text, reasoning
// and tool-call deltas pass through as they come; usage and the finish reason
// are held and sent at the end, finish last, because the usage chunk of
// stream_options.include_usage follows the chunk with the finish reason.
type decoder struct {
	completionID string
	calls        []call        // in the order the model started them
	byWire       map[int64]int // the service's tool-call index → position in calls
	finish       string
	finished     bool
	usage        *provider.Usage
}

type call struct{ id string }

// chunk maps one streamed chunk. Only choice 0 is read (n is never set).
// An error event in the Responses API's shape, {"type": "error", "code",
// "message"}, is the service's error (responsesError).
func (d *decoder) chunk(c sdk.ChatCompletionChunk) ([]provider.Chunk, *provider.Error) {
	if stringField(c.JSON.ExtraFields["type"].Raw()) == "error" && !c.JSON.Choices.Valid() {
		return nil, responsesError([]byte(c.RawJSON()))
	}
	if d.completionID == "" {
		d.completionID = c.ID
	}
	if c.JSON.Usage.Valid() {
		d.usage = usage(c.Usage)
	}
	var out []provider.Chunk
	for _, choice := range c.Choices {
		if choice.Index != 0 {
			continue
		}
		delta := choice.Delta
		for _, f := range reasoningFields {
			// Some services send both fields with the same text: the first
			// that has text counts.
			if r := stringField(delta.JSON.ExtraFields[f].Raw()); r != "" {
				out = append(out, provider.Chunk{Type: provider.ChunkReasoning, Delta: r})
				break
			}
		}
		if delta.Content != "" {
			out = append(out, provider.Chunk{Type: provider.ChunkText, Delta: delta.Content})
		}
		if delta.Refusal != "" {
			out = append(out, provider.Chunk{Type: provider.ChunkText, Delta: delta.Refusal})
		}
		for _, tc := range delta.ToolCalls {
			ch, err := d.toolCall(tc)
			if err != nil {
				return nil, err
			}
			if ch != nil {
				out = append(out, *ch)
			}
		}
		if choice.FinishReason != "" {
			d.finish = choice.FinishReason
			d.finished = true
		}
	}
	return out, nil
}

// toolCall maps one tool-call delta. A delta whose index was not seen, or
// whose id differs from the call last seen at its index (a service that
// reuses an index), starts a call: it must name the tool; a missing id is
// made from the completion id. Any other delta continues the call at its
// index with an arguments piece (nil when the piece is empty).
func (d *decoder) toolCall(tc sdk.ChatCompletionChunkChoiceDeltaToolCall) (*provider.Chunk, *provider.Error) {
	if d.byWire == nil {
		d.byWire = make(map[int64]int)
	}
	pos, seen := d.byWire[tc.Index]
	if seen && (tc.ID == "" || tc.ID == d.calls[pos].id) {
		if tc.Function.Arguments == "" {
			return nil, nil
		}
		return &provider.Chunk{Type: provider.ChunkToolCall, Index: pos, Delta: tc.Function.Arguments}, nil
	}
	if tc.Function.Name == "" {
		return nil, &provider.Error{Code: CodeProtocolViolation,
			Message: fmt.Sprintf("tool call at index %d starts without a function name", tc.Index)}
	}
	id := tc.ID
	if id == "" {
		if d.completionID != "" {
			id = fmt.Sprintf("%s-call-%d", d.completionID, len(d.calls))
		} else {
			id = "call_" + randhex.String(12)
		}
	}
	for _, c := range d.calls {
		if c.id == id {
			return nil, &provider.Error{Code: CodeProtocolViolation,
				Message: fmt.Sprintf("tool call at index %d reuses the id %q of an earlier call", tc.Index, id)}
		}
	}
	pos = len(d.calls)
	d.calls = append(d.calls, call{id: id})
	d.byWire[tc.Index] = pos
	return &provider.Chunk{Type: provider.ChunkToolCall, Index: pos, ID: id, Name: tc.Function.Name,
		Delta: tc.Function.Arguments}, nil
}

// end closes a stream that ended without an error: the usage chunk, if any,
// then the finish chunk. A stream that ended before a finish reason and
// before [DONE] was cut.
func (d *decoder) end(sawDone bool) ([]provider.Chunk, *provider.Error) {
	if !d.finished && !sawDone {
		return nil, &provider.Error{Retryable: true, Code: CodeStreamInterrupted,
			Message: "the stream ended before the response was finished"}
	}
	var out []provider.Chunk
	if d.usage != nil {
		out = append(out, provider.Chunk{Type: provider.ChunkUsage, Usage: d.usage})
	}
	return append(out, provider.Chunk{Type: provider.ChunkFinish, Finish: d.finishReason()}), nil
}

// finishReason maps the service's finish reason: "length" is max-tokens;
// otherwise a response with tool calls finished for them (whatever the
// service called it: some say "stop") and any other ended with stop
// ("stop", "content_filter", or none before [DONE]).
func (d *decoder) finishReason() provider.FinishReason {
	switch {
	case d.finish == "length":
		return provider.FinishMaxTokens
	case len(d.calls) > 0:
		return provider.FinishToolCalls
	}
	return provider.FinishStop
}

// usage maps the service's token counts. DeepSeek reports cache hits as
// prompt_cache_hit_tokens rather than prompt_tokens_details.cached_tokens.
func usage(u sdk.CompletionUsage) *provider.Usage {
	out := &provider.Usage{
		InputTokens:     u.PromptTokens,
		OutputTokens:    u.CompletionTokens,
		ReasoningTokens: u.CompletionTokensDetails.ReasoningTokens,
		CacheReadTokens: u.PromptTokensDetails.CachedTokens,
	}
	if out.CacheReadTokens == 0 {
		var hit int64
		if raw := u.JSON.ExtraFields["prompt_cache_hit_tokens"].Raw(); raw != "" && json.Unmarshal([]byte(raw), &hit) == nil {
			out.CacheReadTokens = hit
		}
	}
	return out
}

// stringField decodes a raw JSON string value; anything else is "".
func stringField(raw string) string {
	var s string
	if raw == "" || json.Unmarshal([]byte(raw), &s) != nil {
		return ""
	}
	return s
}

// watch observes the HTTP exchange of one call beneath the SDK: the
// response (status and headers, for errors the SDK does not decode) and
// whether the event stream carried its terminating "data: [DONE]" line,
// which the SDK does not report apart from a connection that closed.
type watch struct {
	res  *http.Response
	body *watchedBody
}

func (w *watch) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	w.res = res
	if err == nil && res != nil && res.StatusCode < 300 && res.Body != nil {
		w.body = &watchedBody{ReadCloser: res.Body, tail: []byte{'\n'}}
		res.Body = w.body
	}
	return res, err
}

func (w *watch) done() bool { return w.body != nil && w.body.done }

// watchedBody looks for a line "data: [DONE]" (or "data:[DONE]") in what
// the SDK reads. A JSON string cannot hold a raw newline, so the line start
// cannot be forged by streamed content.
type watchedBody struct {
	io.ReadCloser
	tail []byte // the last bytes read, to find a marker split across reads
	done bool
}

var doneMarkers = [...][]byte{[]byte("\ndata: [DONE]"), []byte("\ndata:[DONE]")}

const doneTail = len("\ndata: [DONE]") - 1

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && !b.done {
		buf := append(b.tail, p[:n]...)
		for _, m := range doneMarkers {
			if bytes.Contains(buf, m) {
				b.done = true
			}
		}
		if len(buf) > doneTail {
			buf = buf[len(buf)-doneTail:]
		}
		b.tail = append(b.tail[:0], buf...)
	}
	return n, err
}
