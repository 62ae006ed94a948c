// Package llm is the provider-neutral face of a language model: messages,
// tool calls, usage and the Model interface every backend implements.
//
// Guarantees:
//   - A Response carries the whole assistant turn: text content and every tool
//     call, in the order the provider produced them, with arguments exactly as
//     the provider sent them (possibly malformed JSON; callers validate).
//   - Usage is what the provider reported; Usage.Reported is false when the
//     provider reported nothing, so callers can tell an estimate from a fact.
//   - The Caller on a call's context (WithCaller: run, agent, role) is sent
//     by the HTTP clients as the X-Apodex-Run, X-Apodex-Agent and
//     X-Apodex-Role headers; fields not set are not sent.
//   - Errors that are worth retrying (429, 5xx, connection failures, truncated
//     streams) satisfy IsRetryable; all others do not. WithRetry retries them
//     without ever sleeping past the context's deadline. A reply that is not
//     a stream at all (BadStreamError) is tried at most three times.
//   - A provider's "the prompt is too long" answer, in any of the shapes
//     DetectOverflow knows, is an APIError with Overflow set, so the caller
//     can compact and try again instead of failing (IsContextOverflow).
package llm

import (
	"context"
	"encoding/json"
)

// Role is the author of a message.
type Role string

const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of a conversation.
type Message struct {
	Role    Role   `json:"role"`
	Content string `json:"content,omitempty"`
	// ToolCalls are the calls an assistant message makes.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and Name identify the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	Name       string `json:"name,omitempty"`
	// IsError marks a tool message that reports a failure (Anthropic's is_error).
	IsError bool `json:"is_error,omitempty"`
	// Protected messages (subagent reports, summaries) are never evicted by
	// compaction. Runtime-only: clients do not send it.
	Protected bool `json:"protected,omitempty"`
	// Reasoning is an assistant turn's reasoning text as the provider
	// returned it: Anthropic's thinking blocks, the reasoning_content or
	// reasoning field of OpenAI-compatible servers (vLLM, llama.cpp,
	// DeepSeek, OpenRouter). "" when there was none.
	Reasoning string `json:"reasoning,omitempty"`
	// Thinking are the provider's reasoning blocks that must go back
	// verbatim in later requests (Anthropic: thinking blocks with their
	// signature, redacted_thinking blocks). Clients of providers that need
	// no such echo ignore them.
	Thinking []Thinking `json:"thinking,omitempty"`
}

// Thinking is one opaque reasoning block of an assistant turn.
type Thinking struct {
	// Type is "thinking" or "redacted_thinking".
	Type      string `json:"type"`
	Text      string `json:"text,omitempty"`
	Signature string `json:"signature,omitempty"`
	// Data is a redacted block's encrypted content.
	Data string `json:"data,omitempty"`
}

// ToolCall is one tool invocation requested by the model. Arguments is the raw
// JSON text the provider sent; it may be malformed.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolSpec describes a tool to the model. Parameters is a JSON Schema object.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Request is one model call.
type Request struct {
	Model    string     `json:"model,omitempty"`
	Messages []Message  `json:"messages"`
	Tools    []ToolSpec `json:"tools,omitempty"`
	// MaxOutputTokens bounds the reply; 0 means the provider's default.
	MaxOutputTokens int `json:"max_output_tokens,omitempty"`
	// Temperature is optional; nil leaves the provider's default.
	Temperature *float64 `json:"temperature,omitempty"`
	// ToolChoice is "" (the model decides) or ToolChoiceNone: the tools
	// are listed, so a history with calls stays valid, but none may be
	// called (the salvage call at the deadline).
	ToolChoice string `json:"tool_choice,omitempty"`
	// Turn is the 0-based index of this call among the agent's turns, set by
	// the loop so deterministic policies survive compaction of the history.
	Turn int `json:"turn,omitempty"`
	// Agent is the id of the agent making the call ("main", "lead", "A1");
	// runtime metadata, never sent to a provider.
	Agent string `json:"agent,omitempty"`
	// Purpose is "" for an agent turn, or PurposeSummary / PurposeFinalize
	// for the runtime's own calls (compaction, salvage at the deadline).
	Purpose string `json:"purpose,omitempty"`
}

// InterruptedMarker begins the result of a tool call that was cut off when
// the run's process stopped; a resumed agent reads it (see checkpoint).
const InterruptedMarker = "error: interrupted: the run stopped"

// ToolChoiceNone asks the model for text only.
const ToolChoiceNone = "none"

// Purposes of runtime calls.
const (
	PurposeSummary  = "summary"
	PurposeFinalize = "finalize"
	PurposeVerify   = "verify"
)

// Usage is token accounting for one call. PromptTokens is all input,
// cached or not (Anthropic's input, cache creation and cache read tokens
// added up); CachedTokens and CacheCreationTokens say how much of it came
// from, or went into, the provider's prompt cache. ReasoningTokens is the
// part of CompletionTokens spent on reasoning, when the provider says.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// CachedTokens: prompt tokens read from the cache (OpenAI's
	// prompt_tokens_details.cached_tokens, Anthropic's
	// cache_read_input_tokens).
	CachedTokens int `json:"cached_tokens,omitempty"`
	// CacheCreationTokens: prompt tokens written to the cache (Anthropic's
	// cache_creation_input_tokens).
	CacheCreationTokens int `json:"cache_creation_tokens,omitempty"`
	// ReasoningTokens: completion tokens of reasoning
	// (completion_tokens_details.reasoning_tokens).
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
	// Reported is true when the provider reported these numbers.
	Reported bool `json:"reported"`
}

// Add returns the sum of two usages; Reported stays true only if both were.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		PromptTokens:        u.PromptTokens + v.PromptTokens,
		CompletionTokens:    u.CompletionTokens + v.CompletionTokens,
		TotalTokens:         u.TotalTokens + v.TotalTokens,
		CachedTokens:        u.CachedTokens + v.CachedTokens,
		CacheCreationTokens: u.CacheCreationTokens + v.CacheCreationTokens,
		ReasoningTokens:     u.ReasoningTokens + v.ReasoningTokens,
		Reported:            u.Reported && v.Reported,
	}
}

// Response is one complete assistant turn.
type Response struct {
	// Message has Role assistant, the text content and the tool calls.
	Message Message `json:"message"`
	Usage   Usage   `json:"usage"`
	// FinishReason is the provider's stop reason, normalized where known:
	// "stop", "tool_calls", "length".
	FinishReason string `json:"finish_reason,omitempty"`
	// Model is the model name the provider says answered.
	Model string `json:"model,omitempty"`
	// ID is the provider's id of the reply ("chatcmpl-…", "msg_…"), "" if
	// it sent none.
	ID string `json:"id,omitempty"`
}

// Model is a language model backend.
type Model interface {
	// Generate performs one call and returns the whole assistant turn.
	Generate(ctx context.Context, req *Request) (*Response, error)
}

// ModelFunc adapts a function to Model.
type ModelFunc func(ctx context.Context, req *Request) (*Response, error)

// Generate calls f.
func (f ModelFunc) Generate(ctx context.Context, req *Request) (*Response, error) {
	return f(ctx, req)
}
