package llm

import "context"

// TextSink receives an assistant's text while a streaming client reads it,
// before the reply is whole (a terminal shows it as it arrives). It is
// called from the goroutine making the model call, for every agent's
// calls, so it must be safe for concurrent use and must not block. What it
// receives is only shown: the reply the caller gets, and the record, are
// the same with or without it.
type TextSink func(c Caller, delta string)

type textSinkKey struct{}

// WithTextSink returns ctx carrying sink.
func WithTextSink(ctx context.Context, sink TextSink) context.Context {
	return context.WithValue(ctx, textSinkKey{}, sink)
}

// TextTo returns a function that hands text to the sink ctx carries, with
// ctx's Caller; nil when ctx carries none.
func TextTo(ctx context.Context) func(delta string) {
	sink, _ := ctx.Value(textSinkKey{}).(TextSink)
	if sink == nil {
		return nil
	}
	c := CallerFrom(ctx)
	return func(delta string) {
		if delta != "" {
			sink(c, delta)
		}
	}
}
