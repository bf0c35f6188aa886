package lab

import "flashstep/kernels"

// CheckSource refuses a kernel-track source holding any preprocessing
// directive that reads or names a file. (Stub: filled in next.)
func CheckSource(src string) error {
	var _ kernels.FieldErrors
	return nil
}
