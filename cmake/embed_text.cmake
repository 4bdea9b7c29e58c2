# cmake -DIN="FILE;FILE..." -DOUT=FILE.cc -DNAMESPACE=NS -DSYMBOL=NAME -P embed_text.cmake
# Writes the text of the files, joined in the order given, into FILE.cc as
# `extern const char NAME[]` in namespace NS (a C++ raw string), so that a
# binary carries sources it hands to a driver at run time (the OpenCL kernels,
# docs/opencl.md §3). Each file's text starts with a `#line 1 "NAME"`
# directive, so that a compiler's messages name the file and line.
set(delim "dgemma_embedded")
set(text "")
foreach(f IN LISTS IN)
  file(READ ${f} part)
  get_filename_component(name ${f} NAME)
  string(APPEND text "#line 1 \"${name}\"\n${part}")
endforeach()
string(FIND "${text}" ")${delim}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the raw-string delimiter )${delim}\"")
endif()
file(WRITE ${OUT}.tmp "// Generated from ${IN} by cmake/embed_text.cmake: do not edit.\n"
  "namespace ${NAMESPACE} {\nextern const char ${SYMBOL}[];\nconst char ${SYMBOL}[] = R\"${delim}(${text})${delim}\";\n}\n")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
