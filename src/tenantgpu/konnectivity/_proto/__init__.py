"""Generated gRPC code for the Konnectivity wire (`make proto`); do not edit by hand."""
