/*
 * core.p4 for the soft switch: the declarations every P4_16 program can use
 * (P4_16 language specification, "core library").  Programs include it as
 * <core.p4>; v1model.p4 includes it too.
 */

#ifndef _CORE_P4_
#define _CORE_P4_

/* Built-in error codes.  The order is part of the contract: error values are
 * numbered in declaration order (NoError is 0). */
error {
    NoError,                /* no error */
    PacketTooShort,         /* extract/lookahead ran past the end of the packet */
    NoMatch,                /* no select case matched */
    StackOutOfBounds,       /* header stack index out of range */
    HeaderTooShort,         /* varbit extract longer than the field */
    ParserTimeout,          /* parser ran for too long */
    ParserInvalidArgument   /* bad argument to a parser operation */
}

/* The packet being parsed. */
extern packet_in {
    /* Fixed-size header: copy the next bits of the packet into hdr and make
     * it valid. */
    void extract<T>(out T hdr);
    /* Header with one varbit field that receives variableFieldSizeInBits bits. */
    void extract<T>(out T variableSizeHeader, in bit<32> variableFieldSizeInBits);
    /* The next bits of the packet, without consuming them. */
    T lookahead<T>();
    /* Skip bits. */
    void advance(in bit<32> sizeInBits);
    /* Packet length in bytes (may not be available on every target). */
    bit<32> length();
}

/* The packet being built by a deparser. */
extern packet_out {
    /* Append hdr if it is valid (structs/stacks: each valid element in order). */
    void emit<T>(in T hdr);
}

/* In a parser: when check is false, stop parsing with error toSignal. */
extern void verify(in bool check, in error toSignal);

/* The action that does nothing; default action of many tables. */
@noWarn("unused")
action NoAction() {}

/* Match kinds every target supports. */
match_kind {
    exact,
    ternary,
    lpm
}

/* Compile-time assertions. */
extern bool static_assert(bool check, string message);
extern bool static_assert(bool check);

#endif  /* _CORE_P4_ */
