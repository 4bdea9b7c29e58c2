# One static library per layer of docs/architecture.md §1, read from the
# table there (the same table scripts/check-layers.py checks includes
# against). Each layer's headers are staged under
# ${CMAKE_BINARY_DIR}/layers/<layer>/ (symbolic links to the sources, same
# relative paths as the include spelling), and that folder is the layer's only
# PUBLIC include directory: a layer sees the headers of itself and of the
# layers it links, so an include against the table fails to compile.
#
# Defines, for each layer NAME of the table: DGEMMA_LAYERS (in table order),
# DGEMMA_LAYER_<NAME>_FOLDERS, DGEMMA_LAYER_<NAME>_DEPS, and the function
# dgemma_layer_library(NAME [SOURCES...]) that creates dgemma_<NAME>.

set(DGEMMA_LAYER_TABLE ${CMAKE_SOURCE_DIR}/docs/architecture.md)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${DGEMMA_LAYER_TABLE})
file(STRINGS ${DGEMMA_LAYER_TABLE} dgemma_layer_rows ENCODING UTF-8 REGEX "^\\| [0-9]+ \\| [a-z_]+ \\|")
set(DGEMMA_LAYERS "")
foreach(row IN LISTS dgemma_layer_rows)
  string(REGEX MATCH "^\\| [0-9]+ \\| ([a-z_]+) \\| ([^|]*)\\| ([^|]*)\\|" _ "${row}")
  set(name ${CMAKE_MATCH_1})
  set(folder_cell "${CMAKE_MATCH_2}")
  string(STRIP "${CMAKE_MATCH_3}" deps)
  string(REGEX MATCHALL "`[^`]+`" folders "${folder_cell}")
  string(REPLACE "`" "" folders "${folders}")
  if(deps STREQUAL "—")
    set(deps "")
  endif()
  separate_arguments(deps UNIX_COMMAND "${deps}")
  list(APPEND DGEMMA_LAYERS ${name})
  set(DGEMMA_LAYER_${name}_FOLDERS ${folders})
  set(DGEMMA_LAYER_${name}_DEPS ${deps})
endforeach()
if(NOT DGEMMA_LAYERS)
  message(FATAL_ERROR "no layer table found in ${DGEMMA_LAYER_TABLE}")
endif()

# Stages the headers (and the kernel sources that other files include) of
# layer NAME; returns the staging folder in OUT.
function(dgemma_stage_headers name out)
  set(stage ${CMAKE_BINARY_DIR}/layers/${name})
  file(REMOVE_RECURSE ${stage})
  foreach(folder IN LISTS DGEMMA_LAYER_${name}_FOLDERS)
    # The include spelling drops the root (src/, testing/, include/).
    string(REGEX REPLACE "^(src|testing|include)/" "" key ${folder})
    file(GLOB headers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${folder}/*.h ${CMAKE_SOURCE_DIR}/${folder}/*.cuh
         ${CMAKE_SOURCE_DIR}/${folder}/*.cu)
    foreach(h IN LISTS headers)
      get_filename_component(base ${h} NAME)
      file(MAKE_DIRECTORY ${stage}/${key})
      file(CREATE_LINK ${h} ${stage}/${key}/${base} SYMBOLIC)
    endforeach()
  endforeach()
  set(${out} ${stage} PARENT_SCOPE)
endfunction()

# The .cc files of layer NAME's folders (not of their sub-folders, which are
# layers or parts of their own).
function(dgemma_layer_sources name out)
  set(sources "")
  foreach(folder IN LISTS DGEMMA_LAYER_${name}_FOLDERS)
    file(GLOB s CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${folder}/*.cc)
    list(APPEND sources ${s})
  endforeach()
  set(${out} ${sources} PARENT_SCOPE)
endfunction()

# dgemma_layer_library(NAME SOURCES...): the library dgemma_NAME, linked to
# the libraries of the layers it may include that exist in this build.
function(dgemma_layer_library name)
  dgemma_stage_headers(${name} stage)
  add_library(dgemma_${name} STATIC ${ARGN})
  target_include_directories(dgemma_${name} PUBLIC ${stage})
  foreach(dep IN LISTS DGEMMA_LAYER_${name}_DEPS)
    if(TARGET dgemma_${dep})
      target_link_libraries(dgemma_${name} PUBLIC dgemma_${dep})
    endif()
  endforeach()
endfunction()
