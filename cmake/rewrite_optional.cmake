# SPDX-License-Identifier: Apache-2.0
# cmake -DIN=x.proto -DOUT=y.proto -P rewrite_optional.cmake
# `optional T name = N;`  ->  `oneof _name { T name = N; }`
file(READ ${IN} text)
string(REGEX REPLACE "\n([ \t]*)optional[ \t]+([A-Za-z0-9_.]+)[ \t]+([A-Za-z0-9_]+)[ \t]*=[ \t]*([0-9]+)[ \t]*;"
       "\n\\1oneof _\\3 { \\2 \\3 = \\4; }" text "${text}")
get_filename_component(dir ${OUT} DIRECTORY)
file(MAKE_DIRECTORY ${dir})
file(WRITE ${OUT} "${text}")
