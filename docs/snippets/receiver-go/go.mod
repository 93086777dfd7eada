module receiver

go 1.19

require tourops.example/tourops v0.0.0

// The verifier package from a clone of the repository (it is on no module proxy).
replace tourops.example/tourops => ../../../sdk/go
