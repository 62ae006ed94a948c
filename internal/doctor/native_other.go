//go:build !linux

package doctor

func nativeChecks() []Check {
	return []Check{{Group: "sandbox", Name: "native", Status: Skip, Detail: "the native backend needs Linux"}}
}
