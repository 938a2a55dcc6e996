"""Float64 oracle for vector_add."""


def oracle(inputs, params, variant):
    return {"C": inputs["A"] + inputs["B"]}
