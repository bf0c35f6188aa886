package launch

import "flashstep/kernels"

// OffsetBytesForTest is offsetBytes, for the external tests.
func OffsetBytesForTest(c *kernels.Config) int64 { return offsetBytes(c) }

// ModuleText is moduleText, for the external tests.
func ModuleText(module string) (string, error) { return moduleText(module) }
