package provider_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sessionflow/sessionflow/provider"
)

func signed(delta, sig string) provider.Chunk {
	return provider.Chunk{Type: provider.ChunkReasoning, Delta: delta, Signature: sig}
}

// Signed reasoning blocks (Anthropic's thinking blocks) are kept apart and
// carry their signatures, so they can be sent back verbatim.
func TestAssemblerKeepsSignedReasoningBlocksApart(t *testing.T) {
	a := provider.NewAssembler()
	push(t, a,
		reasoning("first "), reasoning("thought"), signed("", "sig-1"),
		reasoning("second"), signed("!", "sig-2"),
		signed("", "sig-3"), // a block whose text was omitted
		text("answer"),
		call(0, "c1", "read_file", `{}`),
		finish(provider.FinishToolCalls),
	)
	want := []provider.Block{
		{Type: "reasoning", Text: "first thought", Signature: "sig-1"},
		{Type: "reasoning", Text: "second!", Signature: "sig-2"},
		{Type: "reasoning", Signature: "sig-3"},
		{Type: "text", Text: "answer"},
		{Type: "tool-call", ID: "c1", Name: "read_file", Arguments: "{}"},
	}
	if got := a.Content(); !reflect.DeepEqual(got, want) {
		t.Fatalf("content\n got %+v\nwant %+v", got, want)
	}
	if got := a.Interrupted(); !reflect.DeepEqual(got, want[:4]) {
		t.Fatalf("interrupted\n got %+v\nwant %+v", got, want[:4])
	}
	wantStream := []string{
		`{"type":"reasoning-chunks","time0":100,"index":0,"dt":[1],"texts":["first ","thought"]}`,
		`{"type":"chunk","time":102,"chunk":{"type":"reasoning","signature":"sig-1"}}`,
		`{"type":"chunk","time":103,"chunk":{"type":"reasoning","delta":"second"}}`,
		`{"type":"chunk","time":104,"chunk":{"type":"reasoning","delta":"!","signature":"sig-2"}}`,
		`{"type":"chunk","time":105,"chunk":{"type":"reasoning","signature":"sig-3"}}`,
		`{"type":"chunk","time":106,"chunk":{"type":"text","delta":"answer"}}`,
		`{"type":"chunk","time":107,"chunk":{"type":"tool-call","id":"c1","name":"read_file","delta":"{}"}}`,
		`{"type":"chunk","time":108,"chunk":{"type":"finish","finish":"tool-calls"}}`,
	}
	if got := streamStrings(a); !reflect.DeepEqual(got, wantStream) {
		t.Fatalf("stream\n got %q\nwant %q", got, wantStream)
	}
	replayed, err := provider.ReplayStream(a.Stream())
	if err != nil {
		t.Fatal(err)
	}
	b := provider.NewAssembler()
	push(t, b, replayed...)
	if !reflect.DeepEqual(b.Content(), want) || !reflect.DeepEqual(streamStrings(b), wantStream) {
		t.Fatalf("replay differs: %+v", b.Content())
	}
}

func TestAssemblerRefusesMisplacedSignatures(t *testing.T) {
	for name, c := range map[string]provider.Chunk{
		"text":      {Type: provider.ChunkText, Delta: "a", Signature: "s"},
		"tool-call": {Type: provider.ChunkToolCall, ID: "c", Name: "n", Signature: "s"},
		"usage":     {Type: provider.ChunkUsage, Usage: &provider.Usage{}, Signature: "s"},
		"finish":    {Type: provider.ChunkFinish, Finish: "stop", Signature: "s"},
		"utf-8":     signed("", "s\xff"),
	} {
		a := provider.NewAssembler()
		err := a.Push(c, 1)
		if !errors.Is(err, provider.ErrMalformedStream) {
			t.Fatalf("%s: accepted a signature: %v", name, err)
		}
		want := map[string]string{
			"text": "only a reasoning chunk may carry a signature", "tool-call": "a tool-call chunk may carry only index, id, name and delta",
			"usage": "a usage chunk may carry only usage", "finish": "a finish chunk may carry only the finish reason",
			"utf-8": "a signature that is not valid UTF-8",
		}[name]
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: error %q, want %q", name, err, want)
		}
		if a.Chunks() != 0 || len(a.Stream()) != 0 {
			t.Fatalf("%s: a refused chunk changed the assembler", name)
		}
	}
}
