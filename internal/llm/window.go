package llm

import "strings"

// DefaultContextWindow is assumed for models this table does not know: small
// enough to be safe for most local servers.
const DefaultContextWindow = 32768

// windows maps model-name fragments to context windows, most specific first.
var windows = []struct {
	fragment string
	tokens   int
}{
	{"gpt-4.1", 1047576},
	{"gpt-4o", 128000},
	{"gpt-4-turbo", 128000},
	{"gpt-5", 400000},
	{"o1", 200000},
	{"o3", 200000},
	{"o4", 200000},
	{"claude", 200000},
	{"gemini", 1048576},
	{"qwen3", 32768},
	{"qwen2.5", 32768},
	{"llama-3", 131072},
	{"llama3", 131072},
	{"mistral", 32768},
	{"deepseek", 131072},
	{"scripted", 131072},
}

// ContextWindow is the context window, in tokens, of a model by name; names
// it does not know get DefaultContextWindow.
func ContextWindow(model string) int {
	m := strings.ToLower(model)
	for _, w := range windows {
		if strings.Contains(m, w.fragment) {
			return w.tokens
		}
	}
	return DefaultContextWindow
}
