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
	wantRecord := []string{
		`100 {"type":"block-start","index":0,"blockType":"reasoning"}`,
		`100 {"type":"reasoning-delta","index":0,"text":"first "}`,
		`101 {"type":"reasoning-delta","index":0,"text":"thought"}`,
		`102 {"type":"block-end","index":0,"block":{"type":"reasoning","text":"first thought","signature":"sig-1"}}`,
		`103 {"type":"block-start","index":1,"blockType":"reasoning"}`,
		`103 {"type":"reasoning-delta","index":1,"text":"second"}`,
		`104 {"type":"reasoning-delta","index":1,"text":"!"}`,
		`104 {"type":"block-end","index":1,"block":{"type":"reasoning","text":"second!","signature":"sig-2"}}`,
		`105 {"type":"block-start","index":2,"blockType":"reasoning"}`,
		`105 {"type":"block-end","index":2,"block":{"type":"reasoning","text":"","signature":"sig-3"}}`,
		`106 {"type":"block-start","index":3,"blockType":"text"}`,
		`106 {"type":"text-delta","index":3,"text":"answer"}`,
		`107 {"type":"block-end","index":3,"block":{"type":"text","text":"answer"}}`,
		`107 {"type":"block-start","index":4,"blockType":"tool-call"}`,
		`107 {"type":"tool-call-delta","index":4,"id":"c1","name":"read_file","argumentsDelta":"{}"}`,
		`108 {"type":"block-end","index":4,"block":{"type":"tool-call","id":"c1","name":"read_file","arguments":"{}"}}`,
		`108 {"type":"finish","reason":{"kind":"tool-calls"}}`,
	}
	if got := recordStrings(a); !reflect.DeepEqual(got, wantRecord) {
		t.Fatalf("record\n got %q\nwant %q", got, wantRecord)
	}
	if b := replayed(t, a); !reflect.DeepEqual(b.Content(), want) || !reflect.DeepEqual(recordStrings(b), wantRecord) {
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
		if a.Chunks() != 0 || len(a.Record()) != 0 {
			t.Fatalf("%s: a refused chunk changed the assembler", name)
		}
	}
}
