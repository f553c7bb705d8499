"""MLCommons' endpoint client (`inference-endpoint`, "Loadgen++"): its result folders, as v6.1 accepts them."""
