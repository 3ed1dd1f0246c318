package openai_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionflow/sessionflow/provider"
)

func text(s string) provider.Chunk { return provider.Chunk{Type: provider.ChunkText, Delta: s} }
func reasoning(s string) provider.Chunk {
	return provider.Chunk{Type: provider.ChunkReasoning, Delta: s}
}
func toolCall(i int, id, name, delta string) provider.Chunk {
	return provider.Chunk{Type: provider.ChunkToolCall, Index: i, ID: id, Name: name, Delta: delta}
}
func finish(f provider.FinishReason) provider.Chunk {
	return provider.Chunk{Type: provider.ChunkFinish, Finish: f}
}
func usage(u provider.Usage) provider.Chunk {
	return provider.Chunk{Type: provider.ChunkUsage, Usage: &u}
}

func wantChunks(t *testing.T, got result, want ...provider.Chunk) {
	t.Helper()
	if got.err != nil {
		t.Fatalf("stream failed: %v (after %d chunks)", got.err, len(got.chunks))
	}
	if !reflect.DeepEqual(got.chunks, want) {
		t.Fatalf("chunks:\n got %s\nwant %s", dump(got.chunks), dump(want))
	}
}

func dump(cs []provider.Chunk) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "\n  %s index=%d id=%q name=%q delta=%q finish=%q", c.Type, c.Index, c.ID, c.Name, c.Delta, c.Finish)
		if c.Usage != nil {
			fmt.Fprintf(&b, " usage=%+v", *c.Usage)
		}
	}
	return b.String()
}

func TestStreamsTextThenUsageThenFinish(t *testing.T) {
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		sse(w,
			chunk(`{"role":"assistant","content":""}`, ""),
			chunk(`{"content":"Hel"}`, ""),
			chunk(`{"content":"lo"}`, ""),
			chunk(`{}`, "stop"),
			usageChunk(`{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,`+
				`"prompt_tokens_details":{"cached_tokens":8},"completion_tokens_details":{"reasoning_tokens":0}}`),
			"[DONE]")
	})
	got := collect(context.Background(), svc.provider(t, nil), simpleRequest())
	wantChunks(t, got, text("Hel"), text("lo"),
		usage(provider.Usage{InputTokens: 12, OutputTokens: 5, CacheReadTokens: 8}),
		finish(provider.FinishStop))
}

func TestStreamsDeepSeekReasoningContent(t *testing.T) {
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		sse(w,
			chunk(`{"role":"assistant","content":null,"reasoning_content":""}`, ""),
			chunk(`{"content":null,"reasoning_content":"Let me "}`, ""),
			chunk(`{"content":null,"reasoning_content":"think."}`, ""),
			chunk(`{"content":"Answer","reasoning_content":null}`, ""),
			chunk(`{"content":""}`, "stop"),
			usageChunk(`{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30,`+
				`"prompt_cache_hit_tokens":6,"prompt_cache_miss_tokens":4,"completion_tokens_details":{"reasoning_tokens":15}}`),
			"[DONE]")
	})
	got := collect(context.Background(), svc.provider(t, nil), simpleRequest())
	wantChunks(t, got, reasoning("Let me "), reasoning("think."), text("Answer"),
		usage(provider.Usage{InputTokens: 10, OutputTokens: 20, ReasoningTokens: 15, CacheReadTokens: 6}),
		finish(provider.FinishStop))
}

func TestStreamsReasoningField(t *testing.T) {
	// OpenRouter and Ollama name the field "reasoning".
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		sse(w,
			chunk(`{"role":"assistant","reasoning":"hmm"}`, ""),
			chunk(`{"reasoning":" yes","reasoning_content":" yes"}`, ""), // both: once
			chunk(`{"content":"ok"}`, "stop"),
			"[DONE]")
	})
	got := collect(context.Background(), svc.provider(t, nil), simpleRequest())
	wantChunks(t, got, reasoning("hmm"), reasoning(" yes"), text("ok"), finish(provider.FinishStop))
}

func TestStreamsParallelToolCallsInterleavedByIndex(t *testing.T) {
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		sse(w,
			chunk(`{"role":"assistant","content":"Reading both."}`, ""),
			chunk(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read_file","arguments":""}}]}`, ""),
			chunk(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"list_dir","arguments":"{\"pa"}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]}`, ""),
			chunk(`{"tool_calls":[{"index":1,"function":{"arguments":"th\":\".\"}"}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"a.txt\"}"}}]}`, ""),
			chunk(`{}`, "tool_calls"),
			usageChunk(`{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}`),
			"[DONE]")
	})
	got := collect(context.Background(), svc.provider(t, nil), simpleRequest())
	wantChunks(t, got,
		text("Reading both."),
		toolCall(0, "call_a", "read_file", ""),
		toolCall(1, "call_b", "list_dir", `{"pa`),
		toolCall(0, "", "", `{"path":`),
		toolCall(1, "", "", `th":"."}`),
		toolCall(0, "", "", `"a.txt"}`),
		usage(provider.Usage{InputTokens: 3, OutputTokens: 4}),
		finish(provider.FinishToolCalls))
}

func TestToolCallsInOneChunkAndFinishStopBecomesToolCalls(t *testing.T) {
	// Ollama sends each call whole, and some servers say "stop" after calls.
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		sse(w,
			chunk(`{"role":"assistant","content":"","tool_calls":[`+
				`{"id":"call_1","index":0,"type":"function","function":{"name":"a","arguments":"{}"}},`+
				`{"id":"call_2","index":1,"type":"function","function":{"name":"b","arguments":"{\"x\":1}"}}]}`, ""),
			chunk(`{"content":""}`, "stop"),
			"[DONE]")
	})
	got := collect(context.Background(), svc.provider(t, nil), simpleRequest())
	wantChunks(t, got, toolCall(0, "call_1", "a", "{}"), toolCall(1, "call_2", "b", `{"x":1}`),
		finish(provider.FinishToolCalls))
}

func TestToolCallReusingAnIndexWithANewIDIsANewCall(t *testing.T) {
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		sse(w,
			chunk(`{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"a","arguments":"{}"}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"id":"call_2","function":{"name":"b","arguments":"{"}}]}`, ""),
			chunk(`{"tool_calls":[{"index":0,"id":"call_2","function":{"arguments":"}"}}]}`, ""),
			chunk(`{}`, "tool_calls"),
			"[DONE]")
	})
	got := collect(context.Background(), svc.provider(t, nil), simpleRequest())
	wantChunks(t, got, toolCall(0, "call_1", "a", "{}"), toolCall(1, "call_2", "b", "{"),
		toolCall(1, "", "", "}"), finish(provider.FinishToolCalls))
}

func TestToolCallWithoutIDGetsOneFromTheCompletion(t *testing.T) {
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		sse(w,
			chunk(`{"tool_calls":[{"index":0,"function":{"name":"a","arguments":"{}"}}]}`, ""),
			chunk(`{}`, "tool_calls"),
			"[DONE]")
	})
	got := collect(context.Background(), svc.provider(t, nil), simpleRequest())
	wantChunks(t, got, toolCall(0, "chatcmpl-1-call-0", "a", "{}"), finish(provider.FinishToolCalls))
}

func TestFinishLengthIsMaxTokens(t *testing.T) {
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		sse(w, chunk(`{"content":"trunc"}`, "length"), "[DONE]")
	})
	got := collect(context.Background(), svc.provider(t, nil), simpleRequest())
	wantChunks(t, got, text("trunc"), finish(provider.FinishMaxTokens))
}

func TestDoneWithoutFinishReasonEndsWithStop(t *testing.T) {
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		sse(w, chunk(`{"content":"a"}`, ""), "[DONE]")
	})
	got := collect(context.Background(), svc.provider(t, nil), simpleRequest())
	wantChunks(t, got, text("a"), finish(provider.FinishStop))
}

func TestStreamCutMidWayIsRetryable(t *testing.T) {
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		sse(w, chunk(`{"content":"Hel"}`, ""))
		panic(http.ErrAbortHandler) // the connection closes mid-body
	})
	got := collect(context.Background(), svc.provider(t, nil), simpleRequest())
	if len(got.chunks) != 1 || got.chunks[0] != text("Hel") {
		t.Fatalf("chunks before the cut: %s", dump(got.chunks))
	}
	pe := providerError(t, got.err)
	if !pe.Retryable || pe.Code != "stream_interrupted" || pe.Status != 0 {
		t.Fatalf("error = %#v, want retryable stream_interrupted", pe)
	}
	if !strings.HasPrefix(pe.Message, "the stream broke before the response was finished: ") {
		t.Fatalf("message = %q", pe.Message)
	}
	if got.errs != 1 || got.after != 0 {
		t.Fatalf("errors yielded %d, chunks after the error %d; want 1 and 0", got.errs, got.after)
	}
}

func TestStreamEndedCleanlyBeforeFinishIsRetryable(t *testing.T) {
	// The body ends properly, but neither a finish reason nor [DONE] came.
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		sse(w, chunk(`{"content":"Hel"}`, ""))
	})
	got := collect(context.Background(), svc.provider(t, nil), simpleRequest())
	pe := providerError(t, got.err)
	if !pe.Retryable || pe.Code != "stream_interrupted" ||
		pe.Message != "the stream ended before the response was finished" {
		t.Fatalf("error = %#v", pe)
	}
	if len(got.chunks) != 1 {
		t.Fatalf("chunks: %s", dump(got.chunks))
	}
}

func TestDoneMarkerInsideContentDoesNotCountAsDone(t *testing.T) {
	// The model writes the marker in its text: a JSON string holds no raw
	// newline, so it is not a line of the event stream.
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		sse(w, chunk(`{"content":"\ndata: [DONE]\n"}`, ""))
	})
	got := collect(context.Background(), svc.provider(t, nil), simpleRequest())
	pe := providerError(t, got.err)
	if pe.Code != "stream_interrupted" {
		t.Fatalf("error = %#v", pe)
	}
}

func TestStreamCutMidChunkIsACutNotAMalformedChunk(t *testing.T) {
	for _, clean := range []bool{false, true} {
		svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
			streamHeaders(w)
			sse(w, chunk(`{"content":"ok"}`, ""))
			fmt.Fprint(w, `data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"x"`)
			w.(http.Flusher).Flush()
			if !clean {
				panic(http.ErrAbortHandler)
			}
		})
		got := collect(context.Background(), svc.provider(t, nil), simpleRequest())
		pe := providerError(t, got.err)
		if !pe.Retryable || pe.Code != "stream_interrupted" {
			t.Fatalf("clean end %v: error = %#v, want a retryable stream_interrupted", clean, pe)
		}
	}
}

func TestMalformedChunkIsNotRetryable(t *testing.T) {
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		sse(w, chunk(`{"content":"ok"}`, ""), `{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"x"`, "[DONE]")
	})
	got := collect(context.Background(), svc.provider(t, nil), simpleRequest())
	pe := providerError(t, got.err)
	if pe.Retryable || pe.Code != "malformed_chunk" || !strings.HasPrefix(pe.Message, "a streamed chunk is not valid JSON: ") {
		t.Fatalf("error = %#v", pe)
	}
	if len(got.chunks) != 1 {
		t.Fatalf("chunks: %s", dump(got.chunks))
	}
}

func TestToolCallWithoutNameIsAProtocolViolation(t *testing.T) {
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		sse(w, chunk(`{"tool_calls":[{"index":0,"id":"call_1","function":{"arguments":"{}"}}]}`, ""), chunk(`{}`, "tool_calls"), "[DONE]")
	})
	got := collect(context.Background(), svc.provider(t, nil), simpleRequest())
	pe := providerError(t, got.err)
	if pe.Retryable || pe.Code != "protocol_violation" || pe.Message != "tool call at index 0 starts without a function name" {
		t.Fatalf("error = %#v", pe)
	}
}

func TestErrorEventInTheStream(t *testing.T) {
	cases := []struct {
		name, event string
		want        provider.Error
	}{
		{"object", `{"error":{"message":"overloaded","type":"server_error","code":null}}`,
			provider.Error{Retryable: true, Code: "server_error", Message: "overloaded"}},
		{"numeric client code", `{"error":{"message":"context too long","type":"invalid_request_error","code":400}}`,
			provider.Error{Status: 400, Code: "invalid_request_error", Message: "context too long"}},
		{"numeric 429", `{"error":{"message":"slow down","code":429}}`,
			provider.Error{Retryable: true, Status: 429, Message: "slow down"}},
		{"string", `{"error":"model crashed"}`,
			provider.Error{Retryable: true, Message: "model crashed"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
				streamHeaders(w)
				sse(w, chunk(`{"content":"a"}`, ""), tc.event)
			})
			got := collect(context.Background(), svc.provider(t, nil), simpleRequest())
			if pe := providerError(t, got.err); *pe != tc.want {
				t.Fatalf("error = %#v, want %#v", *pe, tc.want)
			}
		})
	}
}

func TestCancelWhileStreamingYieldsTheContextError(t *testing.T) {
	release := make(chan struct{})
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		sse(w, chunk(`{"content":"a"}`, ""))
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got result
	for c, err := range svc.provider(t, nil).Stream(ctx, simpleRequest()) {
		if err != nil {
			got.err = err
			got.errs++
			continue
		}
		got.chunks = append(got.chunks, c)
		cancel()
	}
	if !errors.Is(got.err, context.Canceled) || got.errs != 1 {
		t.Fatalf("error = %v (%d errors), want context.Canceled", got.err, got.errs)
	}
	var pe *provider.Error
	if errors.As(got.err, &pe) {
		t.Fatalf("a cancellation is not a provider error: %#v", pe)
	}
}

func TestStoppingTheIterationEarlyClosesTheStream(t *testing.T) {
	closed := make(chan struct{})
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		sse(w, chunk(`{"content":"a"}`, ""))
		<-r.Context().Done() // the client hung up
		close(closed)
	})
	for range svc.provider(t, nil).Stream(context.Background(), simpleRequest()) {
		break
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection stayed open after the iteration stopped")
	}
}

func TestLogsCarryNoKey(t *testing.T) {
	var logs bytes.Buffer
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		sse(w, chunk(`{"content":"a"}`, "stop"), "[DONE]")
	})
	got := collect(context.Background(), svc.provider(t, &logs), simpleRequest())
	wantChunks(t, got, text("a"), finish(provider.FinishStop))
	if !strings.Contains(logs.String(), "model call") {
		t.Fatalf("no debug line logged: %q", logs.String())
	}
	noKey(t, "the log", logs.String())
}

func TestUsageOnTheFinishChunkAndRepeatedUsageKeepsTheLast(t *testing.T) {
	// vLLM's continuous usage stats put usage on every chunk; Ollama puts it
	// on the chunk with the finish reason.
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		sse(w,
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}],`+
				`"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`,
			`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"stop"}],`+
				`"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`,
			"[DONE]")
	})
	got := collect(context.Background(), svc.provider(t, nil), simpleRequest())
	wantChunks(t, got, text("a"), text("b"), usage(provider.Usage{InputTokens: 5, OutputTokens: 2}), finish(provider.FinishStop))
}

func TestACutCallThenItsRetry(t *testing.T) {
	// The provider keeps no state between calls: the retry of a cut call
	// streams the whole response again.
	var calls atomic.Int32
	svc := newService(t, func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		streamHeaders(w)
		sse(w, chunk(`{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"read_file","arguments":"{\"pa"}}]}`, ""))
		if n == 1 {
			panic(http.ErrAbortHandler)
		}
		sse(w, chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"th\":\"a\"}"}}]}`, ""), chunk(`{}`, "tool_calls"), "[DONE]")
	})
	p := svc.provider(t, nil)
	first := collect(context.Background(), p, simpleRequest())
	if pe := providerError(t, first.err); !pe.Retryable {
		t.Fatalf("the cut is not retryable: %#v", pe)
	}
	wantChunks(t, collect(context.Background(), p, simpleRequest()),
		toolCall(0, "call_1", "read_file", `{"pa`), toolCall(0, "", "", `th":"a"}`), finish(provider.FinishToolCalls))
}
