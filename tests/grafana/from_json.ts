// The type a JSON document must have to be read as T.
//
// @grafana/schema declares many fields with TypeScript string enums
// (ThresholdsMode, LegendDisplayMode, BigValueColorMode, ...). A JSON string
// is never assignable to a string enum, even when it is one of its values, so
// FromJson<T> replaces every string enum with the union of its values
// (`${Enum}`) and recurses through arrays and objects. Everything else keeps
// its type, so wrong keys, wrong types and unknown enum values still fail.
export type FromJson<T> = T extends string
  ? `${T}`
  : T extends number | boolean | null | undefined
    ? T
    : T extends ReadonlyArray<infer U>
      ? Array<FromJson<U>>
      : T extends object
        ? { [K in keyof T]: FromJson<T[K]> }
        : T;
